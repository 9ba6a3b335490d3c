"""The kernels ported from numba-cuda's documentation and CUDA's samples (tests/ported/) check
clean and build to PTX and a cubin for sm_80 and sm_90; tests/gpu/test_ported_kernels.py runs
them against NumPy (on the CPU emulator in the default suite). Also what the compiler proves
about the forms they are written in: CUDA C++'s spelled-out 2-D index, 2-D grid-stride loops, a
grid-stride loop over a copy of the index, and `requires` naming module constants."""

from __future__ import annotations

from pathlib import Path

import pytest

from buildtile.backend import CompileOptions
from buildtile.backends.simt.types import WitnessT
from buildtile.check import check_file
from buildtile.discovery import KernelModule, find_kernels
from buildtile.interop.abi import mangle
from buildtile.plugins import backends
from buildtile.toolchain.nvjitlink import ptx_to_cubin

PORTED = Path(__file__).parent / "ported"
ROOT = Path(__file__).parents[1]
MODULES = sorted(PORTED.glob("*.py"))


def analyzed(path: Path) -> dict:
    registry = backends()
    out = {}
    for src in find_kernels(KernelModule(path.stem, path.resolve()), registry, PORTED):
        impl = registry[src.kind].impl
        out[src.name] = (impl, impl.analyze(src, CompileOptions()))
    return out


def test_the_corpus_has_the_ported_kernels():
    kernels = sum(len(analyzed(path)) for path in MODULES)
    assert len(MODULES) >= 14 and kernels >= 25


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_ported_module_checks_clean_and_builds(path, target):
    found, diags = check_file(path, ROOT)
    assert found >= 1 and diags == []
    for name, (impl, kernel) in analyzed(path).items():
        ptx = impl.to_ptx(kernel, target, CompileOptions())
        assert f".target {target}" in ptx and f".entry {mangle(path.stem, name)}(" in ptx
        assert ptx_to_cubin(ptx, target)[:4] == b"\x7fELF"


def test_spelled_out_2d_index_is_the_2d_witness():
    """``blockIdx.x * blockDim.x + threadIdx.x`` and its ``.y`` twin, as CUDA C++ writes col and row."""
    kernels = analyzed(PORTED / "matmul.py")
    for name in ("sgemm_naive", "matmul_kernel2"):
        kernel = kernels[name][1]
        assert kernel.contract["index_dims"] == 2, name
    sgemm = kernels["sgemm_naive"][1].ir
    assert sgemm.locals["x"] == WitnessT(2, 1) and sgemm.locals["y"] == WitnessT(2, 0)


def test_2d_grid_stride_loops_keep_their_witness_components():
    for name, (_, kernel) in analyzed(PORTED / "mandelbrot.py").items():
        assert kernel.contract["index_dims"] == 2, name
        assert kernel.ir.locals["x"] == WitnessT(2, 1) and kernel.ir.locals["y"] == WitnessT(2, 0), name


def test_a_copy_of_the_index_stepped_by_the_grid_is_a_witness():
    kernel = analyzed(PORTED / "black_scholes.py")["black_scholes_gpu"][1]
    assert kernel.ir.locals["opt"] == WitnessT(1, 0)
    assert kernel.contract["coarsen"] == 1     # it reads the grid's shape


def test_requires_reads_module_constants_as_their_values():
    kernel = analyzed(PORTED / "convolution.py")["convolution_rows"][1]
    (taps,) = [r for r in kernel.contract["requires"] if "KERNEL_LENGTH" in r["text"]]
    assert taps["expr"] == {"op": "cmp", "fn": "==", "lhs": {"op": "len", "param": "c_kernel"},
                            "rhs": {"op": "const", "value": 17}}
