"""Tile kernels built from ``@tile.function`` helpers, run on the CPU emulator
(tests/test_tile_functions.py) and on a GPU (tests/gpu/test_tile_helper_functions.py)."""

import math

from buildtile import tile
from buildtile.types import Tensor, f32, i32

CHUNK = 64


@tile.function
def row_softmax(t):
    """A helper with a tile argument and locals of its own."""
    m = tile.max(t, axis=1)
    e = tile.exp(t - m[:, None])
    return e / tile.sum(e, axis=1)[:, None]


@tile.function
def scaled(t, factor, offset=0.0):
    """Scalar arguments (one defaulted); the same local names as its callers."""
    m = t * factor
    return m + offset


@tile.function
def moments(t, valid, n):
    """Two results, a tile of bools, and a helper called from a helper."""
    mean = tile.sum(t, axis=1) / n
    centred = tile.where(valid, scaled(t, 1.0, 0.0) - mean[:, None], 0.0)
    return mean, tile.sum(centred * centred, axis=1) / n


@tile.kernel(specialize=[{"z": [4, 256]}, {"z": [1, 1024]}])
def softmax_by_helper(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    t = tile.load_like(x, z, padding=-math.inf)
    z.store(row_softmax(t))


@tile.kernel(specialize=[{"z": [4, 256], "mean": [4], "var": [4]}])
def normalise_by_helpers(x: Tensor[f32, 2], alpha: f32, z: tile.Out[f32, 2], mean: tile.Out[f32, 1],
                         var: tile.Out[f32, 1]):
    m = tile.load_like(x, z)
    columns = tile.arange(256)[None, :] + i32(z.tile_id(1) * 256)
    mu, v = moments(m, columns < i32(x.shape[1]), f32(x.shape[1]))
    z.store(scaled(m - mu[:, None], alpha, offset=1.0))
    mean.store(mu)
    var.store(v)
