# expect: BT0308 9:8
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    t = tile.load_like(x, z)
    if t > 0.0:
        t = -t
    z.store(t)
