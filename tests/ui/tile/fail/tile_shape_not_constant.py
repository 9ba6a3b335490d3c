# expect: BT0308 8:28
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    t = tile.load(x, (0,), (x.shape[0],))
    z.store(t)
