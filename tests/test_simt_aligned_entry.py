"""The aligned entry of a SIMT kernel: array data pointers declared 16-byte aligned, kept only
where that changes the PTX, and recorded in the manifest beside the plain entry."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from buildtile import compiler
from buildtile.backend import CompileOptions
from buildtile.config import load_project
from buildtile.image_sizes import image_sizes
from buildtile.inspect import describe

OPTIONS = CompileOptions()

SOURCE = '''
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i64

@simt.kernel(block=256)
def sum4(x: Slice[f32], out: DisjointSlice[f32]):
    """Four consecutive reads per thread."""
    i = simt.index_1d()
    if 4 * i + 3 < len(x) and i < len(out):
        k = 4 * i
        out[i] = x[k] + x[k + 1] + x[k + 2] + x[k + 3]

@simt.kernel(block=256)
def copy(x: Slice[f32], out: DisjointSlice[f32]):
    """One read per thread: nothing to merge."""
    i = simt.index_1d()
    if i < len(out) and i < len(x):
        out[i] = x[i]

@simt.kernel(block=256)
def count(n: i64, step: i64):
    """No array parameter at all."""
    i = simt.index_1d()
'''


def write_project(root: Path) -> Path:
    (root / "vk").mkdir(parents=True)
    (root / "vk" / "__init__.py").write_text("")
    (root / "vk" / "ops.py").write_text(textwrap.dedent(SOURCE))
    (root / "pyproject.toml").write_text('[project]\nname = "vk"\nversion = "0"\n'
                                         '[tool.buildtile]\nkernels = ["vk.ops"]\ntargets = ["sm_80"]\n')
    return root


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    project = load_project(write_project(tmp_path_factory.mktemp("aligned") / "proj"))
    kernels = compiler.analyze(compiler.discover(project), OPTIONS)
    return {b.kernel.source.name: b for b in compiler.compile_entries(kernels, OPTIONS)}


def ptx_of(build, entry) -> str:
    return compiler.entry_ptx(build, entry, "sm_80", OPTIONS)


def test_consecutive_reads_get_an_aligned_entry_with_vector_loads(builds):
    build = builds["sum4"]
    plain, aligned = build.entries
    assert aligned.symbol == plain.symbol + "__a16" and aligned.pointer_align == 16 and plain.pointer_align == 0
    assert 'noalias align 16 %"x.data"' in aligned.llvm_ir and "align 16" not in plain.llvm_ir
    assert "ld.global.nc.v4" in ptx_of(build, aligned)
    assert "ld.global.nc.v4" not in ptx_of(build, plain)
    assert f".visible .entry {aligned.symbol}(" in ptx_of(build, aligned)


@pytest.mark.parametrize("name", ["copy", "count"])
def test_a_kernel_whose_ptx_the_alignment_does_not_change_keeps_one_entry(builds, name):
    (entry,) = builds[name].entries
    assert entry.pointer_align == 0 and entry.symbol == builds[name].kernel.symbol


def test_the_manifest_lists_the_aligned_entry_with_its_images(tmp_path, monkeypatch):
    monkeypatch.setenv("BUILDTILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BUILDTILE_JOBS", "1")
    project = load_project(write_project(tmp_path / "proj"))
    compiler.compile_project(project, tmp_path / "out", log=lambda line: None)
    out = tmp_path / "out" / "vk" / "_buildtile"
    kernels = {k["name"]: k for k in json.loads((out / "manifest.json").read_text())["kernels"]}
    aligned = kernels["sum4"]["aligned"]
    assert aligned["align"] == 16 and aligned["symbol"] == kernels["sum4"]["symbol"] + "__a16"
    assert set(aligned["artifacts"]) == set(kernels["sum4"]["artifacts"]) == {"sm_80", "ptx"}
    ptx = (out / aligned["artifacts"]["ptx"]["path"]).read_text()
    assert "ld.global.nc.v4" in ptx and f".entry {aligned['symbol']}(" in ptx
    assert "aligned" not in kernels["copy"] and "aligned" not in kernels["count"]
    text = describe(str(tmp_path / "out" / "vk"))
    assert "aligned entry, for data pointers aligned to 16 bytes:" in text
    manifest = json.loads((out / "manifest.json").read_text())
    both = kernels["sum4"]["artifacts"]["sm_80"]["size"] + aligned["artifacts"]["sm_80"]["size"]
    assert image_sizes(manifest)["vk.ops.sum4"]["sm_80"] == both
