"""``tile.argmax``, ``tile.argmin`` and ``tile.prod`` on the CPU emulator, against NumPy at ragged
sizes: along each axis of 2-D tiles, inside a warp and across warps, over every axis, with ties
and NaNs, and a row longer than a tile through a running (value, index) pair (kernels and
references: tests/tile_reduction_cases.py; the same on a GPU in tests/gpu/test_tile_reductions_on_gpu.py)."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
import tile_reduction_cases as cases
from tile_reduction_cases import DTYPES, numbers

from buildtile.backend import CompileOptions
from buildtile.backends.tile import ir
from buildtile.backends.tile.plan import summarize, thread_cost, tile_footprint
from buildtile.discovery import KernelModule, find_kernels
from buildtile.emulate.direct import TileKernel
from buildtile.plugins import backends


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    path = tmp_path_factory.mktemp("reduction_cases") / "tile_reduction_kernels.py"
    path.write_text(cases.source())
    registry = backends()
    impl = registry["tile"].impl
    sources = {s.name: s for s in find_kernels(KernelModule("tile_reduction_kernels", path), registry, path.parent)}

    @cache
    def specialization(name: str, rows: int | None = None):
        kernel = impl.analyze(sources[name], CompileOptions())
        found = [s for s in impl.specializations(kernel)
                 if rows is None or next(iter(s.tile_shapes.values()))[0] == rows]
        return found[0], kernel.params

    return specialization


@pytest.fixture(scope="module")
def kernels(specs):
    @cache
    def emulated(name: str, rows: int | None = None) -> TileKernel:
        return TileKernel(*specs(name, rows))
    return emulated


def run_rows(kernels, dtype, x, rows_per_tile):
    best, worst = (np.full((x.shape[0], 1), -1, np.int32) for _ in range(2))
    product = np.zeros((x.shape[0], 1), cases.NUMPY[dtype])
    kernels(f"rows_{dtype}", rows_per_tile)(x, best, worst, product)
    return best[:, 0], worst[:, 0], product[:, 0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tile_rows,shape", [(4, (37, 1000)), (4, (3, 1)), (1, (5, 3000))])
def test_argmax_and_argmin_of_rows_match_numpy_with_ties_to_the_lowest_index(kernels, dtype, tile_rows, shape):
    x = cases.values(dtype, shape, seed=shape[1])      # values in -8..8: most rows tie at their maximum
    best, worst, _ = run_rows(kernels, dtype, x, tile_rows)
    np.testing.assert_array_equal(best, numbers(x, dtype).argmax(axis=1))
    np.testing.assert_array_equal(worst, numbers(x, dtype).argmin(axis=1))


@pytest.mark.parametrize("tile_rows,strategy", [(4, "warp"), (1, "block")])
def test_row_tiles_reduce_inside_a_warp_and_across_warps(specs, tile_rows, strategy):
    spec, _ = specs("rows_f32", tile_rows)
    assert set(summarize(spec.kernel_ir, spec.plan).reductions) == {strategy}


@pytest.mark.parametrize("tile_rows", [4, 1])
def test_a_row_of_equal_values_gives_the_first_position(kernels, tile_rows):
    x = np.full((6, 900), 3.0, np.float32)
    best, worst, _ = run_rows(kernels, "f32", x, tile_rows)
    assert best.tolist() == [0] * 6 and worst.tolist() == [0] * 6


@pytest.mark.parametrize("tile_rows", [4, 1])
def test_nan_counts_as_the_extreme_of_both_and_the_first_nan_wins(kernels, tile_rows):
    x = cases.values("f32", (9, 1000), seed=3)
    x[1, [700, 20, 900]] = np.nan           # the first NaN of row 1 is at 20
    x[4, 999] = np.nan
    x[7, :] = np.nan
    best, worst, _ = run_rows(kernels, "f32", x, tile_rows)
    np.testing.assert_array_equal(best, x.argmax(axis=1))
    np.testing.assert_array_equal(worst, x.argmin(axis=1))
    assert (best[1], best[4], best[7]) == (20, 999, 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tile_rows,shape", [(4, (37, 1000)), (1, (5, 3000))])
def test_prod_of_rows_matches_numpy(kernels, dtype, tile_rows, shape):
    x = cases.powers_of_two(dtype, shape, seed=shape[0])
    _, _, product = run_rows(kernels, dtype, x, tile_rows)
    np.testing.assert_array_equal(numbers(product, dtype), numbers(cases.row_product(x, dtype), dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(64, 32), (41, 70)])
def test_argmax_and_argmin_along_axis_0_match_numpy(kernels, dtype, shape):
    x = cases.values(dtype, shape, seed=shape[0], spread=3)
    best, worst = (np.full(shape[1], -1, np.int32) for _ in range(2))
    kernels(f"cols_{dtype}")(x, best, worst)
    np.testing.assert_array_equal(best, numbers(x, dtype).argmax(axis=0))
    np.testing.assert_array_equal(worst, numbers(x, dtype).argmin(axis=0))


@pytest.mark.parametrize("dtype", DTYPES)
def test_argmax_and_prod_over_every_axis_flatten_the_tile(kernels, dtype):
    shape = (20, 100)                                   # blocks of 16 x 64, ragged on both axes
    x = cases.values(dtype, shape, seed=5, spread=4)
    best = np.full((2, 2), -1, np.int32)
    product = np.zeros((2, 2), cases.NUMPY[dtype])
    kernels(f"blocks_{dtype}")(x, best, np.zeros((2, 2), cases.NUMPY[dtype]))
    want_best, _ = cases.block_reference(x, dtype)
    np.testing.assert_array_equal(best, want_best)
    y = cases.powers_of_two(dtype, shape, seed=6)
    kernels(f"blocks_{dtype}")(y, best, product)
    _, want_product = cases.block_reference(y, dtype)
    np.testing.assert_array_equal(numbers(product, dtype), numbers(want_product, dtype))


@pytest.mark.parametrize("shape", [(6, 1000), (9, 257), (4, 100)])
def test_a_running_pair_over_row_chunks_matches_numpy(kernels, shape):
    x = cases.values("f32", shape, seed=shape[1], spread=20)
    x[0, :] = 1.0                     # a tie across every chunk: the first position wins
    best, value = np.full(shape[0], -1, np.int32), np.zeros(shape[0], np.float32)
    kernels("streamed_argmax")(x, best, value)
    np.testing.assert_array_equal(best, x.argmax(axis=1))
    np.testing.assert_array_equal(value, x.max(axis=1))


def test_an_index_reduction_counts_its_index_in_the_cost_of_crossing_warps(specs):
    spec, _ = specs("rows_f32", 1)
    fp = tile_footprint(spec.kernel_ir)
    carried = {op: c for op, (*_, c) in zip(
        [e.op for e in ir.walk_exprs(spec.kernel_ir.body) if isinstance(e, ir.Reduce)], fp.reductions)}
    assert carried == {"argmax": 2, "argmin": 2, "prod": 1}
    # the three row reductions of a 4096-wide row all cross warps at 256 threads: 2 + 2 + 1
    assert thread_cost(fp, 256)[1] == 5
