# expect: BT0200 8:23
from buildtile import tile
from buildtile.types import f32


@tile.kernel(specialize=[{"z": [128]}])
def k(z: tile.Out[f32, 1], acc: tile.Atomic[f32, 1]):
    z.store(tile.load(acc, (z.tile_id(0),), (128,)))
