"""buildtile-runtime: the distribution that calling prebuilt kernels needs, and no more.

buildtile and buildtile-runtime are built from one ``buildtile/`` folder; their wheels
split it without overlap, a kernel wheel requires the runtime (not the compiler), and
running a kernel package imports no compiler module.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from wheel_support import PACKAGE, REPO, dist_info_file, env, members, pip

import buildtile
from buildtile.hooks.wheel_metadata import RUNTIME_DISTRIBUTION, runtime_requirement

sys.path.insert(0, str(REPO / "runtime"))
from runtime_files import is_runtime_module  # noqa: E402

#: what a kernel package must be able to run without
COMPILER_MODULES = ("buildtile.backends", "buildtile.compiler", "llvmlite", "pluggy", "scikit_build_core")
#: package data of the buildtile distribution (pyproject.toml's [tool.setuptools.package-data])
DATA_PATTERNS = ("py.typed", "emulate/runtime.c", "include/buildtile/*.h", "include/buildtile/*.hpp", "interop/templates/*", "scaffold/template/**/*")


@pytest.fixture(scope="module")
def distributions(tmp_path_factory) -> tuple[Path, Path]:
    """(buildtile-runtime wheel, buildtile wheel), built by pip from a copy of the tree."""
    work = tmp_path_factory.mktemp("dists")
    tree = work / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE"):
        shutil.copy(REPO / name, tree / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "build", "*.egg-info")
    shutil.copytree(REPO / "buildtile", tree / "buildtile", ignore=ignore)
    shutil.copytree(REPO / "runtime", tree / "runtime", symlinks=True, ignore=ignore)
    # build isolation: the setuptools that builds these needs the wheel support that the test
    # environment's may lack
    pip("wheel", "--no-deps", "-w", work / "dist", tree / "runtime", tree)
    (runtime,) = (work / "dist").glob("buildtile_runtime-*.whl")
    (compiler,) = (work / "dist").glob("buildtile-*.whl")
    return runtime, compiler


def package_files(wheel: Path) -> set[str]:
    return {name for name in members(wheel) if not name.split("/")[0].endswith(".dist-info")}


def requirements(wheel: Path) -> list[Requirement]:
    return [Requirement(line.split(":", 1)[1].strip())
            for line in dist_info_file(wheel, "METADATA").splitlines() if line.startswith("Requires-Dist:")]


def tree_files() -> set[str]:
    """Every file the two distributions together must install: the modules and the package data."""
    root = REPO / "buildtile"
    files = {p for p in root.rglob("*.py") if "__pycache__" not in p.parts}
    for pattern in DATA_PATTERNS:
        files |= {p for p in root.glob(pattern) if p.is_file()}
    return {p.relative_to(REPO).as_posix() for p in files}


def test_the_two_wheels_share_no_file_and_together_hold_the_whole_package(distributions):
    runtime, compiler = distributions
    runtime_files, compiler_files = package_files(runtime), package_files(compiler)
    assert runtime_files & compiler_files == set()
    native = {f for f in runtime_files if re.fullmatch(r"buildtile/runtime/_native\..*\.so", f)}
    assert (runtime_files - native) | compiler_files == tree_files()


def test_the_runtime_wheel_holds_the_runtime_and_no_compiler(distributions):
    runtime, _ = distributions
    files = package_files(runtime)
    for module in ("buildtile/__init__.py", "buildtile/runtime/kernel.py", "buildtile/simt.py",
                   "buildtile/tile.py", "buildtile/types.py", "buildtile/interop/manifest.py"):
        assert module in files
    assert not any(f.startswith(("buildtile/backends/", "buildtile/hooks/", "buildtile/toolchain/"))
                   or f in ("buildtile/compiler.py", "buildtile/cli.py") for f in files)
    names = {r.name for r in requirements(runtime)}
    assert names == {"cuda-bindings", "numpy"}


def test_buildtile_requires_exactly_its_own_runtime(distributions):
    runtime, compiler = distributions
    pinned = [r for r in requirements(compiler) if r.name == RUNTIME_DISTRIBUTION]
    assert [str(r.specifier) for r in pinned] == [f"=={buildtile.__version__}"]
    assert f"Version: {buildtile.__version__}\n" in dist_info_file(runtime, "METADATA")
    assert compiler.name.endswith("-py3-none-any.whl")  # the compiled launch call is the runtime's


@pytest.mark.parametrize("version,expected", [
    ("0.1.0", "buildtile-runtime>=0.1.0,<0.2"),
    ("0.7.3.dev1", "buildtile-runtime>=0.7.3,<0.8"),
    ("1.4.2", "buildtile-runtime>=1.4.2,<2"),
    ("2.0", "buildtile-runtime>=2.0.0,<3"),
])
def test_the_runtime_range_spans_the_versions_that_keep_the_abi(version, expected):
    assert runtime_requirement(version) == expected


def test_the_kernel_wheel_requires_the_runtime_and_not_the_compiler(example_site):
    (dist_info,) = example_site.glob("example_kernels-*.dist-info")
    declared = [Requirement(line.split(":", 1)[1].strip())
                for line in (dist_info / "METADATA").read_text().splitlines() if line.startswith("Requires-Dist:")]
    by_name = {r.name: r for r in declared}
    assert "buildtile" not in by_name
    assert by_name[RUNTIME_DISTRIBUTION].specifier == Requirement(runtime_requirement()).specifier
    assert by_name[RUNTIME_DISTRIBUTION].specifier.contains(buildtile.__version__)


RUN_KERNELS = textwrap.dedent("""
    import importlib.abc, json, sys

    BLOCKED = {blocked!r}

    class RefuseCompiler(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ImportError(f"{{name}} is the compiler's, and was imported to run a kernel")

    sys.meta_path.insert(0, RefuseCompiler())

    from buildtile import tile
    from buildtile.runtime.driver import set_driver
    from buildtile.runtime.testing import FakeDriver

    gpu = FakeDriver()
    set_driver(gpu)
    import example_kernels.ops as ops
    import example_kernels.tiles as tiles

    ops.vecadd[4](gpu.array(1000), gpu.array(1000), gpu.array(1000))
    tiles.add(gpu.array(4096), gpu.array(4096), tile.partition(gpu.array(4096), (1024,))).sync_on(None)
    try:  # a refused call renders its diagnostic
        ops.vecadd[4](gpu.array(1000), gpu.array(999), gpu.array(1000))
    except Exception as exc:
        refused = str(exc)
    from buildtile.interop.host_cli import cmake_prefix
    print(json.dumps({{
        "launches": [c[1] for c in gpu.calls if c[0] == "launch"],
        "refused": refused,
        "prefix": cmake_prefix("example_kernels"),
        "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("buildtile",) + BLOCKED),
    }}))
""")


def test_running_kernels_imports_no_compiler_module(example_site):
    blocked = tuple(sorted({m.split(".")[0] if not m.startswith("buildtile") else m for m in COMPILER_MODULES}))
    result = subprocess.run([sys.executable, "-c", RUN_KERNELS.format(blocked=blocked)], capture_output=True,
                            text=True, env=env(example_site), cwd=example_site, check=False)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert len(seen["launches"]) == 2
    assert "error[BT0600]" in seen["refused"]
    assert Path(seen["prefix"]) == example_site / PACKAGE / "_buildtile"
    assert not [m for m in seen["modules"] if m.startswith(COMPILER_MODULES)]
    # and everything it did import ships in buildtile-runtime
    outside = [m for m in seen["modules"] if not is_runtime_module(*_package_and_module(m))]
    assert outside == []


def test_the_blocker_does_catch_a_compiler_import(example_site):
    """The check above could fail: importing the compiler under the same blocker is refused."""
    script = RUN_KERNELS.format(blocked=("buildtile.compiler",)).replace(
        "import example_kernels.ops as ops", "import example_kernels.ops as ops\nimport buildtile.compiler")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=env(example_site), cwd=example_site, check=False)
    assert result.returncode != 0 and "buildtile.compiler is the compiler's" in result.stderr


def _package_and_module(name: str) -> tuple[str, str]:
    """``buildtile.interop.abi`` -> (``buildtile.interop``, ``abi``); a package -> (itself, ``__init__``)."""
    path = REPO / Path(*name.split("."))
    if path.is_dir():
        return name, "__init__"
    package, _, module = name.rpartition(".")
    return package, module


def test_a_setuptools_kernel_project_requires_the_runtime_too(tmp_path):
    from test_build_backend import FIXTURE, setuptools_project

    project = tmp_path / "project"
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns("build", "dist", "_buildtile"))
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('requires-python = ">=3.10"',
                                                       'requires-python = ">=3.10"\ndependencies = ["numpy"]'))
    environment = setuptools_project(project, tmp_path / "site")
    result = subprocess.run([sys.executable, "-c", "import setuptools; setuptools.setup()", "egg_info"],
                            cwd=project, capture_output=True, text=True, env=environment, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    (requires,) = project.glob("*.egg-info/requires.txt")
    declared = [Requirement(line) for line in requires.read_text().split()]
    assert [r.name for r in declared] == ["numpy", RUNTIME_DISTRIBUTION]
    assert declared[1].specifier == Requirement(runtime_requirement()).specifier
