"""Every Tile element type on the CPU emulator, against NumPy at ragged sizes: casts between all
of them, integer bit operations, shifts (constant and run-time amounts), ``//`` and ``%``, float
arithmetic and small integer powers, reductions, implicit promotions, rank-4 and rank-5 tiles,
and the loop and constant forms (kernels and references: tests/tile_dtype_cases.py; the same
run on a GPU in tests/gpu/test_tile_dtypes.py)."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
import tile_dtype_cases as cases
from tile_dtype_cases import DTYPES, FLOATS, INTS, as_float
from buildtile.emulate.direct import TileKernel

from buildtile.backend import CompileOptions
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends

SIZES = [1, 700, 1000]


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    path = tmp_path_factory.mktemp("dtype_cases") / "tile_dtype_kernels.py"
    path.write_text(cases.source())
    registry = backends()
    impl = registry["tile"].impl
    sources = {s.name: s for s in find_kernels(KernelModule("tile_dtype_kernels", path), registry, path.parent)}

    @cache
    def emulated(name: str) -> TileKernel:
        kernel = impl.analyze(sources[name], CompileOptions())
        return TileKernel(impl.specializations(kernel)[0], kernel.params)

    return emulated


@pytest.mark.parametrize("n", [1, 1000])
@pytest.mark.parametrize("src", DTYPES)
def test_astype_converts_between_every_pair_of_dtypes(kernels, src, n):
    args, want = cases.cast_case(src, n)
    kernels(f"cast_from_{src}")(*args)
    for dst, got in zip(DTYPES, args[1:]):
        np.testing.assert_array_equal(got, want[dst], err_msg=f"{src} -> {dst}")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", INTS)
def test_integer_bit_operations_shifts_and_division(kernels, dtype, n):
    args, want = cases.int_case(dtype, n)
    kernels(f"int_ops_{dtype}")(*args)
    for name, got in zip(cases.INT_OUTS, args[4:]):
        np.testing.assert_array_equal(got, want[name], err_msg=f"{name} of {dtype}")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_float_arithmetic_powers_and_integer_conditions(kernels, dtype, n):
    with np.errstate(all="ignore"):
        args, want = cases.float_case(dtype, n)
    kernels(f"float_ops_{dtype}")(*args)
    for name, got in zip(cases.FLOAT_OUTS, args[3:]):
        np.testing.assert_array_equal(as_float(got, dtype), want[name], err_msg=f"{name} of {dtype}")


@pytest.mark.parametrize("rows", [1, 37])
@pytest.mark.parametrize("dtype", DTYPES)
def test_row_reductions_of_every_dtype(kernels, dtype, rows):
    args, want = cases.reduce_case(dtype, rows)
    kernels(f"reduce_{dtype}")(*args)
    for got, expected in zip(args[1:], want):
        np.testing.assert_array_equal(as_float(got, dtype) if dtype in FLOATS else got, expected)


@pytest.mark.parametrize("n", SIZES)
def test_lossless_mixes_promote_implicitly(kernels, n):
    args, want = cases.promotions_case(n)
    kernels("promotions")(*args)
    for got, expected in zip(args[5:], want):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("n", [1, 300])
@pytest.mark.parametrize("count,step", [(5, 1), (7, 3), (6, -2), (0, 4), (4, 0)])
def test_loop_forms_follow_python(kernels, n, count, step):
    args, want = cases.loop_forms_case(n, count, step)
    kernels("loop_forms")(*args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 2, 16, 32), (3, 5, 40, 70)])
def test_rank4_tiles_reduce_and_broadcast(kernels, shape):
    args, want = cases.rank4_case(shape)
    kernels("rank4")(*args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 2, 8, 2, 16), (2, 3, 19, 5, 20)])
def test_rank5_tiles_permute_and_reduce(kernels, shape):
    args, want = cases.rank5_case(shape)
    kernels("rank5")(*args)
    np.testing.assert_array_equal(args[-1], want)
