"""The `buildtile` command line: check, build, inspect, doctor."""

from __future__ import annotations

from pathlib import Path

import pytest

from buildtile.cli import main

ROOT = Path(__file__).parent.parent


def test_check_clean_project_exits_zero(capsys):
    from buildtile.compiler import discover
    from buildtile.config import load_project

    project = ROOT / "example_project"
    kernels = len(list(discover(load_project(project))))
    assert kernels > 30          # the example project's kernels were all found
    assert main(["check", str(project)]) == 0
    assert f"checked {kernels} kernels: no errors" in capsys.readouterr().out


def test_check_bad_kernel_exits_one_with_rustc_style_diagnostic(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["check", "tests/ui/fail/disjoint_shifted_index.py"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error[BT0499]: index is not this thread's own")
    assert "--> tests/ui/fail/disjoint_shifted_index.py:10:11" in err
    assert "Traceback" not in err


def test_check_missing_path_is_a_clean_error(capsys):
    assert main(["check", "/nonexistent/kernels.py"]) == 1
    assert capsys.readouterr().err.startswith("error[BT0010]")


@pytest.fixture(scope="module")
def built_in_place(tmp_path_factory) -> Path:
    """A copy of the example project built in place by `buildtile build`, for sm_90 alone (one
    build for the module's tests: building the project is most of their time)."""
    import shutil

    project = tmp_path_factory.mktemp("in-place") / "example_project"
    shutil.copytree(ROOT / "example_project", project, ignore=shutil.ignore_patterns("build", "cpp", "_buildtile"))
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text.replace('targets = ["sm_80", "sm_90"]', 'targets = ["sm_90"]'))
    assert main(["build", str(project)]) == 0
    return project


def test_build_in_place_then_inspect(built_in_place, capsys):
    project = built_in_place
    assert (project / "example_kernels/_buildtile/manifest.json").is_file()
    capsys.readouterr()
    assert main(["inspect", str(project / "example_kernels")]) == 0
    out = capsys.readouterr().out
    assert "example_kernels.ops.vecadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32])" in out
    assert "sm_90  cubin" in out and "ptx    ptx" in out
    assert "example_kernels.tiles.add(x: Tensor[f32, 1], y: Tensor[f32, 1], z: tile.Out[f32, 1])  " \
           "[tile, one block per tile]" in out
    assert "tile shapes {'z': [1024]}, dtypes {'T': 'f32'}: block (" in out   # add is generic over T
    assert "tile shapes {'z': [1024]}, dtypes {'T': 'bf16'}: block (" in out
    # the package's own demo lists every kernel, tile kernels with their specialisations
    import subprocess
    import sys

    listing = subprocess.run([sys.executable, "-m", "example_kernels", "--list"], cwd=project,
                             capture_output=True, text=True)
    assert listing.returncode == 0, listing.stderr
    assert "example_kernels.tiles.add(x: Tensor[f32, 1], y: Tensor[f32, 1], z: tile.Out[f32, 1])  " \
           "one block per tile" in listing.stdout
    lines = [line for line in listing.stdout.splitlines() if "tile shapes {'z': [1024]}, dtypes {'T': 'f32'}:" in line]
    assert lines and all("PTX sm_90" in line and "sm_90 cubin" in line for line in lines)
    assert "Traceback" not in listing.stderr
    # and checks kernels against NumPy, here on the CPU emulator (every kernel: tests/test_example_demo.py)
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT)}   # this tree's buildtile
    demo = subprocess.run([sys.executable, "-m", "example_kernels", "--cpu", "--only", "numbers.rotate_phase",
                           "cooperative.normalized_histogram"], cwd=project, capture_output=True, text=True, env=env,
                          check=False)   # two modules of one kernel each: little to lower
    assert demo.returncode == 0, demo.stdout + demo.stderr
    checked = [line.split()[0] for line in demo.stdout.splitlines() if line.endswith(" OK")]
    assert checked == ["cooperative.normalized_histogram", "numbers.rotate_phase"], demo.stdout
    assert "running on buildtile CPU emulator" in demo.stdout and not demo.stderr
    unknown = subprocess.run([sys.executable, "-m", "example_kernels", "--only", "ops.nothing"], cwd=project,
                             capture_output=True, text=True, env=env, check=False)
    assert unknown.returncode == 2 and "no kernel ops.nothing" in unknown.stderr


def test_doctor_reports_each_tool(capsys):
    main(["doctor"])
    out = capsys.readouterr().out
    for name in ("LLVM", "nvJitLink", "GPU", "C compiler", "CMake"):
        assert f"] {name}:" in out


def test_build_in_place_also_builds_the_c_library(built_in_place):
    project = built_in_place
    lib = project / "example_kernels/_buildtile/lib/libexample_kernels_kernels.so"
    assert lib.is_file()
    assert (project / "example_kernels/_buildtile/.gitignore").is_file()
