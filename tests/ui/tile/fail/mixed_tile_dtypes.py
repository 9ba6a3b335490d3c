# expect: BT0308 8:13
from buildtile import tile
from buildtile.types import Tensor, f16, f32


@tile.kernel
def k(x: Tensor[f32, 1], h: Tensor[f16, 1], z: tile.Out[f32, 1]):
    z.store(tile.load_like(x, z) * tile.load_like(h, z))
