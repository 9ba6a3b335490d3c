"""The ported-code kernels of tests/simt_cases.py build, and the compiler decides about
them what their correctness needs: a kernel that reads the grid's shape is not coarsened
(a coarsened launch has fewer physical threads than logical ones), numba's grid(2) is x
first, widening inserts its conversions, and tuple assignment reads before it binds.
Their results are checked against NumPy on a GPU by tests/gpu/test_simt_patterns.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from buildtile.backend import CompileOptions
from buildtile.backends.simt import ir
from buildtile.backends.simt.types import F32, F64, I32, I64, WitnessT
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends

CASES = Path(__file__).parent / "simt_cases.py"


@pytest.fixture(scope="module")
def built():
    registry = backends()
    out = {}
    for src in find_kernels(KernelModule("simt_cases", CASES), registry, CASES.parent):
        impl = registry[src.kind].impl
        out[src.name] = (impl, impl.analyze(src, CompileOptions()))
    return out


def test_every_case_lowers_to_ptx(built):
    assert len(built) == 11
    for name, (impl, kernel) in built.items():
        assert f".entry {kernel.symbol}" in impl.to_ptx(kernel, "sm_80", CompileOptions()), name


@pytest.mark.parametrize("name", ["saxpy_while", "saxpy_range"])
def test_grid_stride_kernels_are_not_coarsened(built, name):
    _, kernel = built[name]
    assert kernel.contract["coarsen"] == 1 and kernel.contract["index_dims"] == 1


def test_kernels_that_see_only_their_index_are_coarsened(built):
    for name in ("histogram_widened", "int_to_float", "pairs_and_signs", "fibonacci"):
        assert built[name][1].contract["coarsen"] > 1, name


def test_spelled_out_index_is_index_1d(built):
    kernel = built["copy_explicit"][1]
    assert kernel.contract["index_dims"] == 1
    assert kernel.ir.locals["i"] == WitnessT(1, 0)


def test_grid2_is_x_first(built):
    kernel = built["scale_grid2"][1]
    assert kernel.ir.locals["x"] == WitnessT(2, 1) and kernel.ir.locals["y"] == WitnessT(2, 0)


def test_widening_inserts_conversions(built):
    hist = built["histogram_widened"][1].ir
    (compare,) = [e for e in ir.walk_exprs(hist.body) if isinstance(e, ir.Compare) and isinstance(e.rhs, ir.Len)
                  and e.rhs.param == "bins"]
    assert isinstance(compare.lhs, ir.Cast) and compare.lhs.ty == I64 and compare.lhs.value.ty == I32
    conv = built["int_to_float"][1].ir
    (store,) = [s for s in ir.walk_stmts(conv.body) if isinstance(s, ir.Store)]
    assert isinstance(store.value, ir.Cast) and store.value.ty == F64 and store.value.value.ty == F32


def test_swap_reads_both_values_before_binding(built):
    body = built["fibonacci"][1].ir.body
    (loop,) = [s for s in body if isinstance(s, ir.ForRange)]
    names = [s.name for s in loop.body]
    # both values go into temporaries first, then a and b are bound from them
    assert names[2:] == ["a", "b"] and set(names[:2]).isdisjoint({"a", "b"})
    first_temp = loop.body[2].value
    assert isinstance(first_temp, ir.Var) and first_temp.name == names[0]
