# expect: BT0308 8:13
from buildtile import tile
from buildtile.types import Tensor, i32, u32


@tile.kernel
def k(x: Tensor[i32, 1], h: Tensor[u32, 1], z: tile.Out[i32, 1]):
    z.store(tile.load_like(x, z) * tile.load_like(h, z))
