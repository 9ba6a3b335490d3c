# expect: BT0308 8:13
from buildtile import tile
from buildtile.types import Tensor, f32, i32


@tile.kernel
def k(x: Tensor[i32, 1], z: tile.Out[f32, 1]):
    z.store(tile.load_like(x, z) / 2)
