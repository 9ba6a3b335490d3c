# expect: BT0499 10:38
from buildtile import tile
from buildtile.types import Tensor, f32, i64


@tile.kernel(specialize=[{"z": [2, 256]}])
def k(x: Tensor[f32, 2], n: i64, z: tile.Out[f32, 2]):
    for k in tile.range(n):
        t = tile.load(x, (z.tile_id(0), z.tile_id(1) * 4 + k), (2, 64))
        tile.store(z, (z.tile_id(0), z.tile_id(1) * 4 + k), t)
