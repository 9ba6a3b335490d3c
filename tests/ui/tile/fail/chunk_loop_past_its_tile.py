# expect: BT0499 12:29
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [2, 256]}])
def k(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    row = z.tile_id(0)
    first = z.tile_id(1) * 4
    for k in tile.range(8):
        t = tile.load(x, (row, first + k), (2, 64))
        tile.store(z, (row, first + k), t)
