"""Tile kernels on the CPU emulator through linearised and spilled launch grids, against NumPy.

The host launches the natural grid (one block per tile, the last axis along
x) while it fits CUDA's limits and a linearised one past them. Past them
means millions of tiles, too many to emulate, so these tests shrink the
limits handed to the host's rule (``launch_grid(counts, limits)``): the
kernels then run over a grid that spills from x into y and z, with blocks
past the last tile, exactly as a 1,000,000-row launch does on the GPU.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_tile_emulated import emulated, rng

from buildtile.runtime.tile.grid import launch_grid, natural_grid, tile_counts


def spilled_grid(shape, tile_shape, limits):
    """The host's grid for ``shape`` under ``limits``, checked to be a spilled one."""
    counts = tile_counts(shape, tile_shape)
    grid = launch_grid(counts, limits)
    assert grid is not None and grid != natural_grid(counts)
    assert math.prod(grid) >= math.prod(counts)
    return grid


@pytest.mark.parametrize("shape, limits", [
    ((37, 1000), (5, 3, 65535)),    # 37 rows of tiles: x=5, y=3, z=3, eight blocks past the last tile
    ((37, 1000), (37, 1, 65535)),   # exactly along x
    ((11, 700), (2, 2, 3)),         # into z as well
])
def test_softmax_rows_through_a_spilled_grid(shape, limits):
    grid = spilled_grid(shape, (1, 1024), limits)
    x = (rng(3).standard_normal(shape) * 4).astype(np.float32)
    z = np.full(shape, np.nan, np.float32)
    emulated("tiles", "softmax", ((1, 1024),))(x, z, grid=grid)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(z, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_scale_bias_walks_both_axes_through_a_spilled_grid():
    shape = (150, 300)                                  # 3 x 5 tiles of (64, 64)
    grid = spilled_grid(shape, (64, 64), (4, 2, 65535))  # x=4, y=2, z=2: 16 blocks for 15 tiles
    x = rng(1).standard_normal(shape).astype(np.float32)
    scale, bias = rng(2).standard_normal((2, 300)).astype(np.float32)
    z = np.full(shape, np.nan, np.float32)
    emulated("tiles", "scale_bias", ((64, 64),))(x, scale, bias, z, grid=grid)
    np.testing.assert_allclose(z, x * scale + bias, rtol=1e-6, atol=1e-6)


def test_three_dimensional_tiles_through_a_spilled_grid():
    x, y = rng(17).standard_normal((2, 5, 20, 70)).astype(np.float32)   # 3 x 3 x 3 tiles of (2, 8, 32)
    grid = spilled_grid(x.shape, (2, 8, 32), (4, 2, 65535))             # x=4, y=2, z=4: five spare blocks
    z = np.full(x.shape, np.nan, np.float32)
    emulated("cases", "add3d")(x, y, z, grid=grid)
    np.testing.assert_array_equal(z, x - y)


def test_grouped_matmul_through_a_spilled_grid():
    m, n, k = 200, 130, 48                                   # 4 x 3 tiles of (64, 64), grouped order
    grid = spilled_grid((m, n), (64, 64), (5, 2, 65535))     # x=5, y=2, z=2: 20 blocks for 12 tiles
    a = rng(9).standard_normal((m, k)).astype(np.float16)
    b = rng(10).standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    emulated("tiles", "matmul_f16", ((64, 64),))(a, b, c, grid=grid)
    np.testing.assert_allclose(c.astype(np.float32), a.astype(np.float64) @ b, rtol=2e-3, atol=2e-3 * math.sqrt(k))


def test_a_one_dimensional_grid_keeps_x():
    counts = tile_counts((5000,), (1024,))
    assert launch_grid(counts, (3, 1, 1)) is None   # past x, nothing to spill into: refused
    x, y = rng(5000).standard_normal((2, 5000)).astype(np.float32)
    z = np.full(5000, np.nan, np.float32)
    emulated("tiles", "add", ((1024,),))(x, y, z, grid=launch_grid(counts))
    np.testing.assert_array_equal(z, x + y)


# ---------------------------------------------------------------- tile orders and persistent launches


@pytest.mark.parametrize("blocks", [1, 3, 7, 14])
@pytest.mark.parametrize("schedule", [-1, 1, 2, 3])
def test_scale_bias_in_every_order_and_persistent_grid(blocks, schedule):
    shape = (300, 500)                                  # 5 x 8 tiles of (64, 64): more tiles than blocks
    x = rng(1).standard_normal(shape).astype(np.float32)
    scale, bias = rng(2).standard_normal((2, 500)).astype(np.float32)
    z = np.full(shape, np.nan, np.float32)
    emulated("tiles", "scale_bias", ((64, 64),))(x, scale, bias, z, grid=(blocks, 1, 1), schedule=schedule)
    np.testing.assert_allclose(z, x * scale + bias, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("schedule", [-1, 1, 3])
def test_a_persistent_grouped_matmul_matches_numpy(schedule):
    m, n, k = 200, 130, 48                               # 4 x 3 tiles of (64, 64), five blocks loop over them
    a = rng(9).standard_normal((m, k)).astype(np.float16)
    b = rng(10).standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    emulated("tiles", "matmul_f16", ((64, 64),))(a, b, c, grid=(5, 1, 1), schedule=schedule)
    np.testing.assert_allclose(c.astype(np.float32), a.astype(np.float64) @ b, rtol=2e-3, atol=2e-3 * math.sqrt(k))


def test_persistent_softmax_reuses_shared_memory_across_tiles():
    shape = (37, 3000)                                    # rows wider than a tile: cross-warp reductions
    x = (rng(3).standard_normal(shape) * 4).astype(np.float32)
    z = np.full(shape, np.nan, np.float32)
    emulated("tiles", "softmax", ((1, 1024),))(x, z, grid=(4, 1, 1))
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(z, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_a_persistent_one_dimensional_launch():
    x, y = rng(5000).standard_normal((2, 10_000)).astype(np.float32)
    z = np.full(10_000, np.nan, np.float32)
    emulated("tiles", "add", ((1024,),))(x, y, z, grid=(3, 1, 1))
    np.testing.assert_array_equal(z, x + y)


def test_a_persistent_three_dimensional_launch():
    x, y = rng(17).standard_normal((2, 5, 20, 70)).astype(np.float32)   # 27 tiles of (2, 8, 32)
    z = np.full(x.shape, np.nan, np.float32)
    emulated("cases", "add3d")(x, y, z, grid=(2, 2, 2))                  # 8 blocks, 3 or 4 tiles each
    np.testing.assert_array_equal(z, x - y)
