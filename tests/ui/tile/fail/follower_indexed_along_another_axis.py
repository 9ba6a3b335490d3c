# expect: BT0499 10:26
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [64, 64], "col_sum": [64]}])
def k(x: Tensor[f32, 2], z: tile.Out[f32, 2], col_sum: tile.Out[f32, 1]):
    t = tile.load_like(x, z)
    z.store(t)
    tile.store(col_sum, (z.tile_id(1),), tile.sum(t, axis=0))
