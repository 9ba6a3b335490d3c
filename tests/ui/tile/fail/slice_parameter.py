# expect: BT0308 7:10
from buildtile import tile
from buildtile.types import Slice, f32


@tile.kernel
def k(x: Slice[f32], z: tile.Out[f32, 1]):
    pass
