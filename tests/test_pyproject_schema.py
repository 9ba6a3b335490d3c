"""validate-pyproject checks [tool.buildtile] with buildtile's schema, which refuses what the settings
reader refuses."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from buildtile.config import read_settings, tool_schema
from buildtile.errors import ConfigError

validate_pyproject = pytest.importorskip("validate_pyproject.api",
                                         reason="validate-pyproject is part of the test extra")
from validate_pyproject.errors import ValidationError  # noqa: E402
from validate_pyproject.plugins import PluginWrapper  # noqa: E402

ROOT = Path(__file__).parent.parent
PROJECT = '[project]\nname = "my-kernels"\nversion = "1.0"\n\n'

#: tables both must accept
VALID = {
    "minimal": 'kernels = ["pkg.ops"]',
    "every key": textwrap.dedent("""\
        kernels = ["pkg.ops", "pkg/tiles/*.py", "src/pkg/more.py"]
        targets = ["sm_80", "sm_90a", "sm_100", "sm_120"]
        ptx = false
        opt-level = 0
        checks = "debug"
        jobs = 4
        cache-dir = "off"
        [tool.buildtile.c-abi]
        enabled = true
        [tool.buildtile.torch]
        ops = true
        [tool.buildtile.jax]
        ffi = true
        """),
    "torch ops": 'kernels = ["pkg.ops"]\n[tool.buildtile.torch]\nops = true',
    "cache folder": 'kernels = ["pkg.ops"]\ncache-dir = "~/kernel-cache"',
    "one target": 'kernels = ["pkg.ops"]\ntargets = ["sm_121a"]',
    "tile products": textwrap.dedent("""\
        kernels = ["pkg.ops"]
        [tool.buildtile.tile.specialize.rows]
        shape = ["rows", "cols"]
        rows = [1, 4]
        cols = [256, 1024, 4096]
        T = ["f16", "bf16", "f32"]
        max-elements = 4096
        [tool.buildtile.tile.specialize.pairs]
        shape = { m = [8, "n"], s = [8] }
        n = [8, 16]
        """),
}
#: tables both must refuse
INVALID = {
    "no kernels": 'targets = ["sm_80"]',
    "empty kernels": "kernels = []",
    "kernel module misspelt": 'kernels = ["my-pkg.ops"]',
    "kernel path absolute": 'kernels = ["/pkg/ops.py"]',
    "kernel path leaves the project": 'kernels = ["pkg/../../ops.py"]',
    "kernel path with backslashes": 'kernels = ["pkg\\\\ops.py"]',
    "kernels not a list": 'kernels = "pkg.ops"',
    "unknown key": 'kernels = ["pkg.ops"]\nmisspelt = 1',
    "snake_case key": 'kernels = ["pkg.ops"]\nopt_level = 1',
    "unknown c-abi key": 'kernels = ["pkg.ops"]\n[tool.buildtile.c-abi]\nenable = true',
    "target too old": 'kernels = ["pkg.ops"]\ntargets = ["sm_60"]',
    "Volta, which nvJitLink no longer builds": 'kernels = ["pkg.ops"]\ntargets = ["sm_70"]',
    "no such target": 'kernels = ["pkg.ops"]\ntargets = ["sm_91"]',
    "no such a-target": 'kernels = ["pkg.ops"]\ntargets = ["sm_80a"]',
    "target misspelt": 'kernels = ["pkg.ops"]\ntargets = ["sm80"]',
    "target twice": 'kernels = ["pkg.ops"]\ntargets = ["sm_80", "sm_80"]',
    "no targets": 'kernels = ["pkg.ops"]\ntargets = []',
    "opt-level 4": 'kernels = ["pkg.ops"]\nopt-level = 4',
    "opt-level negative": 'kernels = ["pkg.ops"]\nopt-level = -1',
    "opt-level a bool": 'kernels = ["pkg.ops"]\nopt-level = true',
    "checks unknown": 'kernels = ["pkg.ops"]\nchecks = "paranoid"',
    "ptx a string": 'kernels = ["pkg.ops"]\nptx = "yes"',
    "jobs negative": 'kernels = ["pkg.ops"]\njobs = -1',
    "cache-dir with a NUL": 'kernels = ["pkg.ops"]\ncache-dir = "cache\\u0000dir"',
    "unknown torch key": 'kernels = ["pkg.ops"]\n[tool.buildtile.torch]\nop = true',
    "torch ops a string": 'kernels = ["pkg.ops"]\n[tool.buildtile.torch]\nops = "yes"',
    "unknown jax key": 'kernels = ["pkg.ops"]\n[tool.buildtile.jax]\nxla = true',
    "c-abi not a table": 'kernels = ["pkg.ops"]\nc-abi = true',
    "tile product not a table": 'kernels = ["pkg.ops"]\n[tool.buildtile.tile.specialize]\nrows = [1, 4]',
    "tile product mixing dtypes and extents": (
        'kernels = ["pkg.ops"]\n[tool.buildtile.tile.specialize.rows]\nshape = ["n"]\nn = [1, "f16"]'),
    "tile product with an unknown dtype": (
        'kernels = ["pkg.ops"]\n[tool.buildtile.tile.specialize.rows]\nT = ["f8"]'),
    "tile product with an empty list": (
        'kernels = ["pkg.ops"]\n[tool.buildtile.tile.specialize.rows]\nshape = ["n"]\nn = []'),
    "tile product with a zero extent": (
        'kernels = ["pkg.ops"]\n[tool.buildtile.tile.specialize.rows]\nshape = ["n"]\nn = [0, 4]'),
    "tile product listing a value twice": (
        'kernels = ["pkg.ops"]\n[tool.buildtile.tile.specialize.rows]\nshape = ["n"]\nn = [4, 4]'),
    "tile product max-elements zero": (
        'kernels = ["pkg.ops"]\n[tool.buildtile.tile.specialize.rows]\nshape = ["n"]\nn = [4]\nmax-elements = 0'),
    "tile product misnamed": (
        'kernels = ["pkg.ops"]\n[tool.buildtile.tile.specialize."row-tiles"]\nshape = ["n"]\nn = [4]'),
    "tile unknown key": 'kernels = ["pkg.ops"]\n[tool.buildtile.tile]\nproducts = {}',
}


def buildtile_table(body: str) -> dict:
    return tomllib.loads("[tool.buildtile]\n" + body)["tool"]["buildtile"]


def reader_accepts(body: str) -> bool:
    try:
        read_settings(buildtile_table(body), "pyproject.toml", env={})
    except ConfigError:
        return False
    return True


def schema_accepts(body: str) -> bool:
    validator = validate_pyproject.Validator(plugins=[PluginWrapper("buildtile", tool_schema)])
    try:
        validator(tomllib.loads(PROJECT + "[tool.buildtile]\n" + body))
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("body", VALID.values(), ids=VALID.keys())
def test_both_accept(body):
    assert reader_accepts(body) and schema_accepts(body)


@pytest.mark.parametrize("body", INVALID.values(), ids=INVALID.keys())
def test_both_refuse(body):
    assert not reader_accepts(body)
    assert not schema_accepts(body)


def test_the_schema_is_one_validate_pyproject_can_register():
    schema = tool_schema("buildtile")   # validate-pyproject passes the tool's name
    assert schema["$id"] and schema["$schema"] == "http://json-schema.org/draft-07/schema#"


def test_a_project_without_the_table_is_left_alone():
    validator = validate_pyproject.Validator(plugins=[PluginWrapper("buildtile", tool_schema)])
    assert validator(tomllib.loads(PROJECT + "[tool.other]\nanything = 1\n"))


def _installed_plugin() -> bool:
    return any(ep.name == "buildtile" for ep in entry_points(group="validate_pyproject.tool_schema"))


@pytest.mark.skipif(not _installed_plugin(), reason="buildtile is not installed, so validate-pyproject cannot find it")
def test_the_validate_pyproject_command_finds_and_uses_the_schema(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    def validate(text: str) -> subprocess.CompletedProcess:
        path = tmp_path / "pyproject.toml"
        path.write_text(text)
        return subprocess.run([sys.executable, "-m", "validate_pyproject", str(path)],
                              capture_output=True, text=True, env=env)

    good = validate(PROJECT + '[tool.buildtile]\nkernels = ["pkg.ops"]\ntargets = ["sm_90", "sm_100"]\n')
    assert good.returncode == 0, good.stdout + good.stderr
    bad = validate(PROJECT + '[tool.buildtile]\nkernels = ["pkg.ops"]\ntargets = ["sm_60"]\n')
    assert bad.returncode == 1 and "tool.buildtile.targets" in bad.stdout + bad.stderr
    assert "ValidationError" in bad.stderr   # validate-pyproject's own report, not a broken plugin
    assert "TypeError" not in bad.stderr and "SchemaMissingId" not in bad.stderr
    unrelated = validate(PROJECT + "[tool.other]\nanything = 1\n")
    assert unrelated.returncode == 0, unrelated.stdout + unrelated.stderr
