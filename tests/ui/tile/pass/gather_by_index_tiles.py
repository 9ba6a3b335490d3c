from buildtile import tile
from buildtile.types import Tensor, f32, i32, i64


@tile.kernel(specialize=[{"z": [16, 64]}])
def k(table: Tensor[f32, 2], ids: Tensor[i32, 1], z: tile.Out[f32, 2]):
    """tile.load with tiles of indices, and tile.gather with a mask and a padding."""
    rows, cols = z.tile_shape
    row = tile.load(ids, (z.tile_id(0),), (rows,))[:, None]
    col = (tile.arange(cols, i64) + z.tile_id(1) * cols)[None, :]
    first = tile.load(table, (row, col))
    again = tile.gather(table, (row, col), mask=col < table.shape[1], padding=0.0)
    z.store(first + again)
