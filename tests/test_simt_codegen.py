"""The SIMT pipeline without a GPU: example kernels -> PTX -> cubin for each target."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from buildtile.backend import CompileOptions
from buildtile.compiler import discover
from buildtile.config import load_project
from buildtile.plugins import backends
from buildtile.toolchain.nvjitlink import ptx_to_cubin

EXAMPLE = Path(__file__).parent.parent / "example_project"
OPTIONS = CompileOptions()


def example_kernels():
    project = load_project(EXAMPLE)
    registry = backends()
    return {src.name: registry[src.kind].impl.analyze(src, OPTIONS) for src in discover(project) if src.kind == "simt"}


KERNELS = example_kernels()


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_example_kernel_links_to_cubin(name, target):
    kernel = KERNELS[name]
    ptx = backends()["simt"].impl.to_ptx(kernel, target, OPTIONS)
    assert f".target {target}" in ptx
    assert f".visible .entry {kernel.symbol}(" in ptx
    cubin = ptx_to_cubin(ptx, target)
    assert cubin[:4] == b"\x7fELF"
    assert kernel.symbol.encode() in cubin


def test_block_contract_becomes_reqntid():
    ptx = backends()["simt"].impl.to_ptx(KERNELS["matadd"], "sm_90", OPTIONS)
    assert re.search(r"\.reqntid 16, 16, 1\b", ptx)
    ptx = backends()["simt"].impl.to_ptx(KERNELS["vecadd"], "sm_90", OPTIONS)
    assert re.search(r"\.reqntid 256, 1, 1\b", ptx)


def test_params_follow_abi_v1():
    vecadd = KERNELS["vecadd"]
    assert [(p["name"], p["kind"], p["dtype"], p["role"]) for p in vecadd.params] == [
        ("a", "slice", "f32", "in"), ("b", "slice", "f32", "in"), ("c", "disjoint_slice", "f32", "out"),
    ]
    ptx = backends()["simt"].impl.to_ptx(vecadd, "sm_90", OPTIONS)
    # pointer + length per slice: 6 parameters (and the logical grid of a coarsened kernel)
    assert len(re.findall(rf"{vecadd.symbol}_param_\d+[,\n]", ptx)) == 6 + (vecadd.contract["coarsen"] > 1)
    matadd = KERNELS["matadd"]
    ptx = backends()["simt"].impl.to_ptx(matadd, "sm_90", OPTIONS)
    # pointer + 2 extents + 2 strides per rank-2 tensor, three tensors
    assert len(re.findall(rf"{matadd.symbol}_param_\d+[,\n]", ptx)) == 15


def entry_params(llvm_ir: str, symbol: str) -> list[str]:
    """The parameter names of the kernel function ``symbol`` in LLVM IR text."""
    header = re.search(rf'define ptx_kernel void @"{re.escape(symbol)}"\((.*)\)', llvm_ir).group(1)
    return re.findall(r'%"([^"]+)"', header)


@pytest.mark.parametrize("name", ["vecadd", "matadd"])
def test_the_kernel_function_takes_the_abi_parameters_in_order(name):
    from buildtile.interop.abi import kernel_params, trailing_params

    kernel = KERNELS[name]
    expected = [p.name for p in kernel_params(kernel.params) + trailing_params(kernel.contract)]
    assert len(expected) == {"vecadd": 7, "matadd": 15}[name]
    assert entry_params(backends()["simt"].impl.llvm_ir(kernel, OPTIONS), kernel.symbol) == expected


def test_readonly_inputs_use_the_noncoherent_path():
    ptx = backends()["simt"].impl.to_ptx(KERNELS["vecadd"], "sm_90", OPTIONS)
    assert ptx.count("ld.global.nc") >= 2
    assert ptx.count("ld.global.") == ptx.count("ld.global.nc")
    assert "st.global" in ptx


def test_disjoint_write_is_bounds_guarded():
    # the store must be skipped for an index past the output's length
    llvm_ir = backends()["simt"].impl.llvm_ir(KERNELS["saxpy"], OPTIONS)
    assert re.search(r"icmp ult i64 %\"?[\w.]+\"?, %\"out\.len\"", llvm_ir)


def test_requires_become_expression_trees():
    reqs = KERNELS["vecadd"].contract["requires"]
    assert reqs[0] == {"text": "len(a) == len(c)", "expr": {
        "op": "cmp", "fn": "==", "lhs": {"op": "len", "param": "a"}, "rhs": {"op": "len", "param": "c"}}}
    assert KERNELS["matadd"].contract["index_dims"] == 2


def test_weak_literal_takes_type_of_the_variable_it_meets():
    # `acc = 0.0` meets f64 data later, so the accumulator is f64 throughout
    assert KERNELS["polyval_abs"].ir.locals["acc"].name == "f64"
    assert KERNELS["collatz_steps"].ir.locals["n"].name == "i64"
    assert KERNELS["collatz_steps"].ir.locals["steps"].name == "i32"


def test_floor_division_and_modulo_follow_python_for_negative_operands():
    llvm_ir = backends()["simt"].impl.llvm_ir(KERNELS["collatz_steps"], OPTIONS)
    assert "srem" in llvm_ir and "sdiv" in llvm_ir


def test_debug_build_bounds_checks_reads_and_release_does_not():
    registry = backends()
    project = load_project(EXAMPLE)
    src = next(s for s in discover(project) if s.name == "vecadd")
    debug = CompileOptions(checks="debug")
    kernel = registry["simt"].impl.analyze(src, debug)
    sites = kernel.bounds_sites
    line = 1 + next(n for n, text in enumerate(src.lines) if "c[i] = a[i] + b[i]" in text)
    assert [(s["param"], s["line"], s["text"]) for s in sites] == [("a", line, "a[i]"), ("b", line, "b[i]")]
    debug_ptx = registry["simt"].impl.to_ptx(kernel, "sm_90", debug)
    release_ptx = registry["simt"].impl.to_ptx(KERNELS["vecadd"], "sm_90", OPTIONS)
    assert re.search(r"\.visible \.global .*__buildtile_bounds", debug_ptx)
    assert "__buildtile_bounds" not in release_ptx
    assert "atom" in debug_ptx and "atom" not in release_ptx
    assert ptx_to_cubin(debug_ptx, "sm_90")[:4] == b"\x7fELF"


def test_index_only_kernels_are_coarsened_and_take_the_logical_grid_last():
    assert KERNELS["vecadd"].contract["coarsen"] == 4
    assert KERNELS["matadd"].contract["coarsen"] == 1            # 2-D: not coarsened
    ptx = backends()["simt"].impl.to_ptx(KERNELS["vecadd"], "sm_90", OPTIONS)
    assert len(re.findall(rf"{KERNELS['vecadd'].symbol}_param_\d+[,\n]", ptx)) == 7


def test_block_level_kernels_are_not_coarsened():
    project = load_project(EXAMPLE)
    registry = backends()
    coarsen = {src.name: registry[src.kind].impl.analyze(src, OPTIONS).contract["coarsen"]
               for src in discover(project) if src.kind == "simt"}
    # shared memory, thread geometry, warps or a 3-D index: one logical block per block
    for name in ("block_sum", "transpose_tiled", "softmax_rows", "laplacian_3d", "matadd"):
        assert coarsen[name] == 1, name
    assert coarsen["histogram"] == coarsen["saxpy"] == 4


def test_launch_extras_divide_the_grid_and_pass_the_logical_extent():
    from buildtile.interop.abi import launch_extras

    assert launch_extras({"coarsen": 4}, 10) == (3, [10])
    assert launch_extras({"coarsen": 4}, 8) == (2, [8])
    assert launch_extras({"coarsen": 1}, 10) == (10, [])
    assert launch_extras({}, 10) == (10, [])


def test_min_compute_capability_skips_older_targets(tmp_path):
    from buildtile.compiler import compile_project

    pkg = tmp_path / "hopperpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text(
        "from buildtile import simt\nfrom buildtile.types import DisjointSlice, f32\n\n"
        "@simt.kernel(block=128, min_compute_capability=\"sm_90\")\n"
        "def fill(out: DisjointSlice[f32]):\n    i = simt.index_1d()\n    out[i] = 1.0\n\n"
        "@simt.kernel(block=128)\n"
        "def fill_any(out: DisjointSlice[f32]):\n    i = simt.index_1d()\n    out[i] = 2.0\n")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "hopperpkg"\nversion = "1"\n[tool.buildtile]\nkernels = ["hopperpkg.ops"]\n'
        'targets = ["sm_80", "sm_90"]\n')
    manifest = compile_project(load_project(tmp_path), tmp_path / "out", log=lambda _: None)
    arts = {k["name"]: k["artifacts"] for k in manifest["kernels"]}
    assert set(arts["fill"]) == {"sm_90", "ptx"} and arts["fill"]["ptx"]["target"] == "sm_90"
    assert set(arts["fill_any"]) == {"sm_80", "sm_90", "ptx"} and arts["fill_any"]["ptx"]["target"] == "sm_80"


ATOMIC_READ_ONLY = '''
from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, i32

@simt.kernel(block=128)
def peek(a: AtomicSlice[i32], c: DisjointSlice[i32]):
    i = simt.index_1d()
    v = a[i]
'''

COMPILE_EACH_OPT_LEVEL = '''
import sys
from pathlib import Path
from buildtile.backend import CompileOptions
from buildtile.compiler import discover
from buildtile.config import load_project
from buildtile.plugins import backends
src = next(iter(discover(load_project(Path(sys.argv[1])))))
impl = backends()["simt"].impl
kernel = impl.analyze(src, CompileOptions())
for level in range(4):
    print("LEVEL", level)
    print(impl.to_ptx(kernel, "sm_80", CompileOptions(opt_level=level)))
'''


def test_atomic_slice_that_is_only_read_compiles_at_every_opt_level(tmp_path):
    # a read-only AtomicSlice must not reach the non-coherent load path, which LLVM cannot
    # select for an atomic load (it aborts the process): compile in a child process
    import subprocess
    import sys

    (tmp_path / "peekpkg").mkdir()
    (tmp_path / "peekpkg" / "__init__.py").write_text("")
    (tmp_path / "peekpkg" / "ops.py").write_text(ATOMIC_READ_ONLY)
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "peekpkg"\nversion = "0"\n[tool.buildtile]\nkernels = ["peekpkg.ops"]\ntargets = ["sm_80"]\n')
    done = subprocess.run([sys.executable, "-c", COMPILE_EACH_OPT_LEVEL, str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    levels = done.stdout.split("LEVEL ")[1:]
    assert len(levels) == 4
    for text in levels:
        # the element is still read, atomically (relaxed), never through ld.global.nc
        assert re.search(r"ld\.relaxed\.\w+\.global\.b32", text), text
        assert "ld.global.nc" not in text
        assert ptx_to_cubin(text.split("\n", 1)[1], "sm_80")[:4] == b"\x7fELF"
