"""Outputs of different ranks in one kernel (tests/tile_follower_cases.py) on the CPU emulator,
against NumPy at ragged sizes; the same kernels run on a GPU in tests/gpu/test_tile_follower_outputs.py."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from buildtile.emulate.direct import TileKernel

from buildtile.backend import CompileOptions
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends

ROOT = Path(__file__).parent.parent
CASES = Path(__file__).parent / "tile_follower_cases.py"


@cache
def compiled(name: str):
    registry = backends()
    (src,) = [s for s in find_kernels(KernelModule("tile_follower_cases", CASES), registry, ROOT) if s.name == name]
    impl = registry["tile"].impl
    kernel = impl.analyze(src, CompileOptions())
    return impl, kernel


@cache
def emulated(name: str, primary_tile: tuple) -> TileKernel:
    impl, kernel = compiled(name)
    (spec,) = [s for s in impl.specializations(kernel) if tuple(s.tile_shapes["z"]) == primary_tile]
    return TileKernel(spec, kernel.params)


def data(shape, seed):
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(np.float32)


def test_the_grid_comes_from_the_output_of_the_highest_rank():
    _, kernel = compiled("softmax_with_stats")
    assert kernel.grid_param == "z"


@pytest.mark.parametrize("tile_shape,shape", [((1, 1024), (3, 1000)), ((4, 256), (6, 200)), ((4, 256), (9, 256))])
def test_softmax_with_row_statistics_matches_numpy(tile_shape, shape):
    x = data(shape, 1)
    z = np.full(shape, np.nan, np.float32)
    row_max, row_sum = np.full((2, shape[0]), np.nan, np.float32)
    emulated("softmax_with_stats", tile_shape)(x, row_max, z, row_sum)
    m = x.max(axis=1)
    e = np.exp(x.astype(np.float64) - m[:, None])
    np.testing.assert_array_equal(row_max, m)
    np.testing.assert_allclose(row_sum, e.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(z, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("shape", [(2, 4, 64), (5, 3, 50)])
def test_rank_three_with_followers_of_ranks_two_and_one(shape):
    x = data(shape, 2)
    z = np.full(shape, np.nan, np.float32)
    mean = np.full(shape[:2], np.nan, np.float32)
    first = np.full(shape[:1], np.nan, np.float32)
    emulated("centre_3d", (2, 4, 64))(x, z, mean, first)
    mu = x.mean(axis=2)
    np.testing.assert_allclose(mean, mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(z, x - mu[:, :, None], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(first, x[:, 0, 0])


@pytest.mark.parametrize("shape", [(4, 64), (9, 300)])
def test_only_the_first_block_along_the_other_axes_stores_a_follower(shape):
    x = np.abs(data(shape, 3)) + 1.0
    z = np.full(shape, np.nan, np.float32)
    row_sum, writer = np.full((2, shape[0]), np.nan, np.float32)
    emulated("row_sum_over_wide_rows", (4, 64))(x, z, row_sum, writer)
    np.testing.assert_allclose(row_sum, x.sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(writer, 0.0)      # column tile 0 wrote it, though 5 blocks share a row
    np.testing.assert_allclose(z, x / x.sum(axis=1, keepdims=True), rtol=1e-5)
