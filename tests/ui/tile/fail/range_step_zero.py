# expect: BT0308 9:31
from buildtile import tile
from buildtile.types import f32, i64


@tile.kernel(specialize=[{"z": [256]}])
def k(n: i64, z: tile.Out[f32, 1]):
    acc = tile.zeros((256,), f32)
    for i in tile.range(0, n, 0):
        acc += 1.0
    z.store(acc)
