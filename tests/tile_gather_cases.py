"""Tile kernels that gather (read at tiles of indices), run on the CPU emulator
(tests/test_tile_gather.py) and on a GPU (tests/gpu/test_tile_gathers.py)."""

from buildtile import tile
from buildtile.types import Tensor, f32, i32, i64


@tile.kernel(specialize=[{"z": [256]}])
def take(x: Tensor[f32, 1], idx: Tensor[i32, 1], z: tile.Out[f32, 1]):
    """z[i] = x[idx[i]], with -1.0 where idx[i] is outside x (tile.load with a tile of indices)."""
    where = tile.load_like(idx, z, padding=-1)
    z.store(tile.load(x, where, padding=-1.0))


@tile.kernel(specialize=[{"z": [16, 32]}])
def embedding(table: Tensor[f32, 2], ids: Tensor[i64, 1], z: tile.Out[f32, 2]):
    """z[r, :] = table[ids[r], :]: a row index per row, a column per column (broadcast together),
    masked where the column lies past the table's width."""
    rows, cols = z.tile_shape
    row = tile.load(ids, (z.tile_id(0),), (rows,))[:, None]
    col = (tile.arange(cols, i64) + z.tile_id(1) * cols)[None, :]
    z.store(tile.gather(table, (row, col), mask=col < table.shape[1], padding=0.0))


@tile.kernel(specialize=[{"z": [128]}])
def reverse(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    """z[i] = x[len(x) - 1 - i]: indices computed in the kernel, a scalar per-axis index too."""
    n = z.tile_shape[0]
    i = tile.arange(n, i64) + z.tile_id(0) * n
    z.store(tile.gather(x, x.shape[0] - 1 - i))
