# expect: BT0499 10:38
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [2, 256]}])
def k(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    for k in tile.range(4):
        t = tile.load(x, (z.tile_id(0), z.tile_id(1) + k), (2, 64))
        tile.store(z, (z.tile_id(0), z.tile_id(1) + k), t)
