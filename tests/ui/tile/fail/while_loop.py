# expect: BT0200 9:5
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    t = tile.load_like(x, z)
    while x.shape[0] > 0:
        t = t * 2.0
    z.store(t)
