"""Tile kernels drawing from the Philox stream of buildtile.random, run on the CPU emulator
(tests/test_tile_random.py) and on a GPU (tests/gpu/test_tile_random_streams.py)."""

from buildtile import tile
from buildtile.types import Tensor, f32, i32, i64


@tile.kernel(specialize=[{"z": [256]}, {"z": [1024]}])
def uniform_1d(seed: i64, z: tile.Out[f32, 1]):
    """z[i] = random.uniform(seed, i): offsets from the element's global index."""
    n = z.tile_shape[0]
    z.store(tile.rand(seed, tile.arange(n, i64) + z.tile_id(0) * n))


@tile.kernel(specialize=[{"z": [16, 64]}])
def normal_2d(seed: i32, base: i64, z: tile.Out[f32, 2]):
    """z[r, c] = random.normal(seed, base + r * cols + c), a 2-D tile of offsets, an i32 seed."""
    rows, cols = z.tile_shape
    r = tile.arange(rows, i64)[:, None] + z.tile_id(0) * rows
    c = tile.arange(cols, i64)[None, :] + z.tile_id(1) * cols
    z.store(tile.randn(seed, base + r * z.shape[1] + c))


@tile.kernel(specialize=[{"z": [512]}])
def dropout(x: Tensor[f32, 1], p: f32, seed: i64, z: tile.Out[f32, 1]):
    """Dropout with keep probability 1 - p, offsets an i32 tile."""
    n = z.tile_shape[0]
    keep = tile.rand(seed, tile.arange(n, i32) + i32(z.tile_id(0) * n)) >= p
    scale = 1.0 / (1.0 - p)
    z.store(tile.where(keep, tile.load_like(x, z) * scale, 0.0))


@tile.kernel(specialize=[{"z": [128]}])
def one_draw_per_tile(seed: i64, z: tile.Out[f32, 1]):
    """A scalar offset: one number for the whole tile, z[i] = random.normal(seed, i // 128)."""
    z.store(tile.full((128,), tile.randn(seed, z.tile_id(0)), f32))
