"""Kernel wheels carry ``py.typed`` and a ``.pyi`` beside each kernel module, so a type checker
sees each kernel's parameters: a right call passes mypy, a wrong one fails it."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import buildtile.build
from buildtile.interop.stubs import module_stub, wheel_files

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "typed_project"

GOOD_CALLS = """
from buildtile import tile
from buildtile.runtime import DeviceArray
from typed_kernels import ops

def run(x: DeviceArray, out: DeviceArray) -> None:
    ops.scale[ops.blocks_for(len(out))](2.0, x, out)
    ops.scale[(4,), (256,)](2, x, out, stream=0)
    launch = ops.scale.prepare(grid=ops.Plan(10).grid())
    launch(1.5, x, out)
    ops.add_one(x, tile.partition(out, [256])).sync_on(0)
    block: int = ops.BLOCK
"""

#: each wrong call, and the mypy message that names it
BAD_CALLS = {
    "ops.scale[1](x, out)": 'Too few arguments for "__call__" of "_scale__launch"',
    'ops.scale[1]("two", x, out)': 'Argument 1 to "__call__" of "_scale__launch" has incompatible type "str"',
    "ops.scale.prepare(grid=1)(2.0, x, 3)": 'Argument 3 to "__call__" of "_scale__launch" has incompatible type "int"',
    "ops.add_one(x)": 'Too few arguments for "__call__" of "_add_one__kernel"',
    'ops.blocks_for("n")': 'Argument 1 to "blocks_for" has incompatible type "str"',
    "ops.no_such_kernel": 'Module has no attribute "no_such_kernel"',
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The fixture's wheel, built through the PEP 517 hook and unpacked as pip lays it out."""
    root = tmp_path_factory.mktemp("typed") / "project"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("build", "dist", "_buildtile"))
    dist = root / "dist"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        wheel = dist / buildtile.build.build_wheel(str(dist), {})
    site = root / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    return site


def mypy(site: Path, script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    user = tmp_path / "user.py"
    user.write_text(script)
    env = {"MYPYPATH": f"{site}:{REPO_ROOT}", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-incremental",
                           "--cache-dir", str(tmp_path / "cache"), str(user)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, check=False)


def test_the_wheel_carries_py_typed_and_a_stub_beside_the_kernel_module(installed):
    assert (installed / "typed_kernels" / "py.typed").is_file()
    stub = (installed / "typed_kernels" / "ops.pyi").read_text()
    assert "def __call__(self, alpha: float, x: _ArrayArg, out: _ArrayArg, /, *, stream: _StreamArg = None)" in stub
    assert "def blocks_for(n: int, block: int=...) -> int:" in stub
    assert not (installed / "typed_kernels" / "__init__.pyi").exists()   # no kernels there: left to the source


def test_a_correct_call_passes_mypy(installed, tmp_path):
    run = mypy(installed, GOOD_CALLS, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr


def test_each_wrong_call_fails_mypy_on_its_own_line(installed, tmp_path):
    script = GOOD_CALLS + "".join(f"    {call}\n" for call in BAD_CALLS)
    run = mypy(installed, script, tmp_path)
    assert run.returncode == 1, run.stdout
    first = len(GOOD_CALLS.splitlines()) + 1
    errors = [e for e in run.stdout.splitlines() if ": error:" in e]
    assert {int(e.split(":")[1]) for e in errors} == set(range(first, first + len(BAD_CALLS))), run.stdout
    for line, message in enumerate(BAD_CALLS.values(), start=first):
        assert any(e.startswith(f"user.py:{line}:") and message in e for e in errors), (message, run.stdout)


def _stub(source: str, kernels: list[dict] = ()) -> str:
    return module_stub(ast.parse(source), list(kernels), "pkg/mod.py")


def test_names_a_stub_cannot_follow_read_as_any_instead_of_vanishing():
    stub = _stub("import os\nfor name in ('a', 'b'):\n    globals()[name] = 1\nLIMIT = 4\n")
    assert "def __getattr__(name: str) -> _Any: ..." in stub
    assert "import os as os" in stub and "LIMIT: int" in stub
    assert "__getattr__" not in _stub("LIMIT = 4\n")


def test_kernel_language_annotations_of_device_helpers_read_as_any():
    stub = _stub("from buildtile.types import f32\ndef twice(v: f32, n: int) -> f32:\n    return v * 2\n")
    assert "def twice(v: _Any, n: int) -> _Any:" in stub


def test_a_hand_written_stub_in_the_sources_is_kept(tmp_path):
    stubs = tmp_path / "_buildtile" / "stubs"
    stubs.mkdir(parents=True)
    (stubs / "ops.pyi").write_text("generated")
    (stubs / "py.typed").write_text("")
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "ops.pyi").write_text("by hand")
    assert list(wheel_files(tmp_path / "_buildtile", package).values()) == ["pkg/py.typed"]


def test_stub_parameters_follow_the_manifest():
    record = {"name": "k", "kind": "simt", "params": [
        {"name": "n", "kind": "scalar", "dtype": "i64"}, {"name": "flag", "kind": "scalar", "dtype": "bool"},
        {"name": "y", "kind": "disjoint_tensor", "dtype": "f32"}]}
    stub = _stub("def k(n, flag, y):\n    pass\n", [record])
    assert "def __call__(self, n: int, flag: bool, y: _ArrayArg, /, *, stream: _StreamArg = None)" in stub
