"""Tile kernels with outputs of different ranks: lower-rank outputs follow the primary's tile ids.
Run on the CPU emulator (tests/test_tile_followers.py) and on a GPU (tests/gpu/test_tile_follower_outputs.py)."""

import math

from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [1, 1024], "row_max": [1], "row_sum": [1]},
                         {"z": [4, 256], "row_max": [4], "row_sum": [4]}])
def softmax_with_stats(x: Tensor[f32, 2], row_max: tile.Out[f32, 1], z: tile.Out[f32, 2],
                       row_sum: tile.Out[f32, 1]):
    """A row softmax with each row's maximum and sum of exponentials beside it (the primary, z, is
    not the first output: the grid comes from the output of the highest rank)."""
    t = tile.load_like(x, z, padding=-math.inf)
    m = tile.max(t, axis=1)
    e = tile.exp(t - m[:, None])
    s = tile.sum(e, axis=1)
    z.store(e / s[:, None])
    row_max.store(m)
    tile.store(row_sum, (z.tile_id(0),), s)


@tile.kernel(specialize=[{"z": [2, 4, 64], "mean": [2, 4], "first": [2]}])
def centre_3d(x: Tensor[f32, 3], z: tile.Out[f32, 3], mean: tile.Out[f32, 2], first: tile.Out[f32, 1]):
    """Rank 3 with followers of ranks 2 and 1: the mean over the last axis, and each (2, 4, 64)
    tile's first element of its first row, read through tile.load_like of a follower."""
    t = tile.load_like(x, z)
    mu = tile.sum(t, axis=2) / f32(x.shape[2])
    z.store(t - mu[:, :, None])
    mean.store(mu)
    first.store(tile.sum(tile.load(x, (first.tile_id(0), 0, 0), (2, 1, 1)), axis=2).reshape((2,)))


@tile.kernel(specialize=[{"z": [4, 64], "row_sum": [4], "writer": [4]}])
def row_sum_over_wide_rows(x: Tensor[f32, 2], z: tile.Out[f32, 2], row_sum: tile.Out[f32, 1],
                           writer: tile.Out[f32, 1]):
    """Rows wider than a tile: every block walks its whole row for the sum, and only the block at
    column tile 0 stores the followers (``writer`` records which block did)."""
    i = z.tile_id(0)
    total = tile.zeros((4,), f32)
    for k in tile.range(z.num_tiles(1)):
        total = total + tile.sum(tile.load(x, (i, k), (4, 64)), axis=1)
    z.store(tile.load_like(x, z) / total[:, None])
    row_sum.store(total)
    writer.store(tile.full((4,), f32(z.tile_id(1)), f32))
