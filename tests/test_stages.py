"""Each stage of a kernel, on disk (`buildtile build --emit`) and on stdout (`buildtile inspect --stage`)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from buildtile.cli import main
from buildtile.interop.abi import mangle

OPS = textwrap.dedent("""
    from buildtile import simt
    from buildtile.types import DisjointSlice, Slice, f32


    @simt.kernel(block=128)
    def axpy(alpha: f32, x: Slice[f32], y: DisjointSlice[f32]):
        i = simt.index_1d()
        if i < len(y):
            y[i] = alpha * x[i]
""")
TILES = textwrap.dedent("""
    from buildtile import tile
    from buildtile.types import Tensor, f32


    @tile.kernel(specialize=[{"z": [256]}, {"z": [1024]}])
    def double(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
        z.store(tile.load(x, (z.tile_id(0),), z.tile_shape) * 2.0)
""")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("stages")
    (root / "stagepkg").mkdir()
    (root / "stagepkg" / "__init__.py").write_text("")
    (root / "stagepkg" / "ops.py").write_text(OPS)
    (root / "stagepkg" / "tiles.py").write_text(TILES)
    (root / "pyproject.toml").write_text(textwrap.dedent("""
        [project]
        name = "stagepkg"
        version = "0"
        [tool.buildtile]
        kernels = ["stagepkg.ops", "stagepkg.tiles"]
        targets = ["sm_80", "sm_90"]
        [tool.buildtile.c-abi]
        enabled = false
    """))
    return root


@pytest.fixture(scope="module")
def emitted(project) -> Path:
    assert main(["build", str(project), "--emit", "typed-ir,llvm,ptx"]) == 0
    return project / "build" / "buildtile" / "stages"


def manifest_of(project: Path) -> dict:
    return {k["name"]: k for k in json.loads((project / "stagepkg/_buildtile/manifest.json").read_text())["kernels"]}


def test_emit_writes_one_folder_per_entry(emitted):
    assert sorted(p.name for p in emitted.iterdir()) == [
        "stagepkg.ops.axpy", "stagepkg.tiles.double.t1024", "stagepkg.tiles.double.t256"]
    for folder in emitted.iterdir():
        assert sorted(p.name for p in folder.iterdir()) == [
            "llvm.txt", "ptx.sm_80.txt", "ptx.sm_90.txt", "typed-ir.txt"]


def test_emitted_ptx_is_the_ptx_the_build_ships(emitted, project):
    record = manifest_of(project)["axpy"]
    for target in ("sm_80", "sm_90"):
        ptx = (emitted / "stagepkg.ops.axpy" / f"ptx.{target}.txt").read_text()
        assert f".visible .entry {record['symbol']}(" in ptx and f".target {target}" in ptx
    shipped = project / "stagepkg/_buildtile" / record["artifacts"]["ptx"]["path"]
    assert (emitted / "stagepkg.ops.axpy" / "ptx.sm_80.txt").read_text() == shipped.read_text()


def test_emitted_llvm_ir_defines_each_entry(emitted, project):
    for spec in manifest_of(project)["double"]["tile"]["specializations"]:
        label = "t" + "x".join(map(str, spec["tile_shapes"]["z"]))
        llvm_ir = (emitted / f"stagepkg.tiles.double.{label}" / "llvm.txt").read_text()
        assert "define " in llvm_ir and f'@"{spec["symbol"]}"' in llvm_ir


def test_emitted_typed_ir_names_the_kernels_params(emitted, project):
    kernels = manifest_of(project)
    for folder, name in (("stagepkg.ops.axpy", "axpy"), ("stagepkg.tiles.double.t256", "double")):
        typed_ir = (emitted / folder / "typed-ir.txt").read_text()
        assert f"name='{name}'" in typed_ir
        for param in kernels[name]["params"]:
            assert f"name='{param['name']}'" in typed_ir
        assert " at 0x" not in typed_ir, "no object addresses: the text is the same on every build"


def test_emit_of_an_unknown_stage_is_a_clean_error(project, capsys):
    assert main(["build", str(project), "--emit", "llvm,cubins"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error[BT0010]: --emit: unknown stage `cubins`")
    assert "stages: typed-ir, llvm, ptx" in err


def test_inspect_prints_the_ptx_of_one_kernel_for_one_target(project, capsys):
    assert main(["inspect", "--stage", "ptx", "axpy", "--target", "sm_90", str(project)]) == 0
    out = capsys.readouterr().out
    assert f".visible .entry {mangle('stagepkg.ops', 'axpy')}(" in out and ".target sm_90" in out


def test_inspect_defaults_to_the_oldest_target(project, capsys):
    assert main(["inspect", "--stage", "ptx", "stagepkg.ops.axpy", str(project)]) == 0
    assert ".target sm_80" in capsys.readouterr().out


def test_inspect_prints_every_specialization_or_the_one_named(project, capsys):
    assert main(["inspect", "--stage", "llvm", "double", str(project)]) == 0
    out = capsys.readouterr().out
    assert out.count("define ") == 2
    assert "==> stagepkg.tiles.double.t256 <==" in out and "==> stagepkg.tiles.double.t1024 <==" in out
    assert main(["inspect", "--stage", "llvm", "double.t1024", str(project)]) == 0
    out = capsys.readouterr().out
    assert out.count("define ") == 1 and f'@"{mangle("stagepkg.tiles", "double")}__t1024"' in out and "==>" not in out


def test_inspect_typed_ir_names_the_params(project, capsys):
    assert main(["inspect", "--stage", "typed-ir", "axpy", str(project)]) == 0
    out = capsys.readouterr().out
    assert all(f"name='{p}'" in out for p in ("alpha", "x", "y"))


@pytest.mark.parametrize("kernel,words", [
    ("nothing", "error[BT0010]: no kernel `nothing` in"),
    ("double.t7", "error[BT0010]: kernel `stagepkg.tiles.double` has no entry `t7`"),
])
def test_inspect_of_an_unknown_kernel_is_a_clean_error(project, capsys, kernel, words):
    assert main(["inspect", "--stage", "ptx", kernel, str(project)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(words) and "Traceback" not in err


def test_inspect_takes_a_path_only_with_a_stage(project, capsys):
    assert main(["inspect", "axpy", str(project)]) == 1
    assert capsys.readouterr().err.startswith("error[BT0010]: `buildtile inspect` takes a PATH and --target")
