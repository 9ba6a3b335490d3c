# expect: BT0308 10:9
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [16]}])
def k(x: Tensor[f32, 2], z: tile.Out[f32, 1]):
    acc = tile.zeros((16,), f32)
    for j in tile.range(4):
        acc = acc[:, None] + tile.load(x, (z.tile_id(0), j), (16, 16))
    z.store(acc)
