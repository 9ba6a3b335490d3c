"""Per-target checks run in a real build: a backend refuses a target with a located diagnostic.

The cases under tests/ui/targets/ are kernel files with a ``# targets:`` line
(the project's targets), an ``# expect:`` line, and the rendered diagnostics
the build must print beside them (``<name>.stderr``), as rustc's UI tests.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from buildtile.check import check_project
from buildtile.cli import main
from buildtile.compiler import compile_project
from buildtile.config import load_project
from buildtile.diagnostics import render_all
from buildtile.errors import CompileError
from ui_corpus import expected

CASES = sorted((Path(__file__).parent / "ui" / "targets").glob("*.py"))
PACKAGE = "uitargets"


def targets_of(path: Path) -> list[str]:
    header = next(line for line in path.read_text().splitlines() if line.startswith("# targets:"))
    return re.findall(r"sm_\d+a?", header)


def project_of(source: str, targets: list[str], root: Path, module: str = "kernels") -> Path:
    (root / PACKAGE).mkdir(parents=True)
    (root / PACKAGE / "__init__.py").write_text("")
    (root / PACKAGE / f"{module}.py").write_text(source)
    quoted = ", ".join(f'"{t}"' for t in targets)
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "{PACKAGE}"\nversion = "0"\n[tool.buildtile]\nkernels = ["{PACKAGE}.{module}"]\n'
        f"targets = [{quoted}]\n")
    return root


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_build_refuses_the_target_with_the_expected_diagnostics(path, tmp_path):
    root = project_of(path.read_text(), targets_of(path), tmp_path / "proj", module=path.stem)
    with pytest.raises(CompileError) as err:
        compile_project(load_project(root), tmp_path / "out", log=lambda _: None)
    diags = err.value.diagnostics
    assert [(d.code, d.span.line, d.span.col + 1) for d in diags] == expected(path)
    assert render_all(diags) + "\n" == path.with_suffix(".stderr").read_text()
    assert not (tmp_path / "out" / PACKAGE).exists(), "a refused build writes no package"


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_check_reports_what_the_build_refuses(path, tmp_path):
    root = project_of(path.read_text(), targets_of(path), tmp_path / "proj", module=path.stem)
    found, diags = check_project(root)
    assert found == 1
    assert render_all(diags) + "\n" == path.with_suffix(".stderr").read_text()


MMA_CASE = Path(__file__).parent / "ui" / "targets" / "mma_below_sm80.py"


@pytest.mark.parametrize("target", ["sm_75"])
def test_building_an_mma_kernel_for_an_old_target_stops_at_the_mma(target, tmp_path, capsys):
    root = project_of(MMA_CASE.read_text(), [target], tmp_path / "proj")
    assert main(["build", str(root)]) == 1
    err = capsys.readouterr().err
    line = 1 + next(n for n, text in enumerate(MMA_CASE.read_text().splitlines()) if "tile.mma(" in text)
    col = 1 + MMA_CASE.read_text().splitlines()[line - 1].index("tile.mma(")
    assert err.startswith(f"error[BT0600]: `tile.mma` needs sm_80 or newer, but the project targets {target}\n")
    assert f"--> {PACKAGE}/kernels.py:{line}:{col}" in err
    assert f"= help: remove {target} from tool.buildtile.targets" in err
    assert "Traceback" not in err
    assert not (root / PACKAGE / "_buildtile").exists()


def test_a_tile_kernel_without_mma_builds_for_sm75(tmp_path):
    source = (
        "from buildtile import tile\nfrom buildtile.types import Tensor, f32\n\n\n"
        '@tile.kernel(specialize=[{"z": [256]}])\n'
        "def double(x: Tensor[f32, 1], z: tile.Out[f32, 1]):\n"
        "    z.store(tile.load(x, (z.tile_id(0),), z.tile_shape) * 2.0)\n")
    root = project_of(source, ["sm_75"], tmp_path / "proj")
    manifest = compile_project(load_project(root), tmp_path / "out", log=lambda _: None)
    (kernel,) = manifest["kernels"]
    assert set(kernel["artifacts"]) == {"sm_75", "ptx"} and kernel["artifacts"]["ptx"]["target"] == "sm_75"
    cubin = tmp_path / "out" / PACKAGE / "_buildtile" / kernel["artifacts"]["sm_75"]["path"]
    assert cubin.read_bytes()[:4] == b"\x7fELF"


def test_a_kernel_whose_compute_capability_no_target_has_is_a_located_bt0010(tmp_path):
    source = ("from buildtile import simt\nfrom buildtile.types import DisjointSlice, f32\n\n\n"
              "@simt.kernel(block=128, min_compute_capability=\"sm_90\")\n"
              "def hopper_only(c: DisjointSlice[f32]):\n    c[simt.index_1d()] = 1.0\n")
    root = project_of(source, ["sm_80"], tmp_path / "proj")
    with pytest.raises(CompileError) as info:
        compile_project(load_project(root), tmp_path / "out", log=lambda _: None)
    (diag,) = info.value.diagnostics
    assert diag.code == "BT0010" and "needs compute capability 90" in diag.message
    assert (diag.span.file, diag.span.line) == ("uitargets/kernels.py", 5)
    assert not (tmp_path / "out" / PACKAGE / "_buildtile").exists()
