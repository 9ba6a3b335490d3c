"""Tile kernels that scatter (atomic adds into tile.Atomic outputs), run on the CPU emulator
(tests/test_tile_scatter.py) and on a GPU (tests/gpu/test_tile_scatters.py)."""

from buildtile import tile
from buildtile.types import Tensor, f32, i32, i64


@tile.kernel(specialize=[{"z": [256]}])
def index_add(x: Tensor[f32, 1], idx: Tensor[i32, 1], z: tile.Out[f32, 1], acc: tile.Atomic[f32, 1]):
    """acc[idx[i]] += x[i] for every i (indices outside acc add nothing), and z = 2 x beside it."""
    t = tile.load_like(x, z)
    z.store(t * 2.0)
    inside = tile.arange(256, i64) + z.tile_id(0) * 256 < x.shape[0]
    tile.atomic_add(acc, tile.load_like(idx, z, padding=-1), t, mask=inside)


@tile.kernel(specialize=[{"z": [16, 64]}])
def histogram_2d(x: Tensor[i32, 2], z: tile.Out[i32, 2], counts: tile.Atomic[i64, 2]):
    """counts[row // 16, x[row, col]] += 1: a 2-D atomic output, a scalar per-axis index, scalar values."""
    rows, cols = z.tile_shape
    t = tile.load_like(x, z, padding=-1)
    z.store(t)
    tile.atomic_add(counts, (z.tile_id(0), t), 1)
