# expect: BT0499 10:47
from buildtile import tile
from buildtile.types import Tensor, f32, i64


@tile.kernel(specialize=[{"z": [256]}])
def k(x: Tensor[f32, 1], offset: i64, z: tile.Out[f32, 1]):
    for k in tile.range(4):
        t = tile.load(x, (z.tile_id(0) * 4 + k,), (64,))
        tile.store(z, (z.tile_id(0) * 4 + k + offset,), t)
