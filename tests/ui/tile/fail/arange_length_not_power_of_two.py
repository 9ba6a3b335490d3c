# expect: BT0308 8:13
from buildtile import tile
from buildtile.types import i32


@tile.kernel(specialize=[{"z": [1024]}])
def k(z: tile.Out[i32, 1]):
    z.store(tile.arange(0, 1000))
