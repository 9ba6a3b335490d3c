# expect: BT0594 9:5
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    t = tile.load_like(x, z)
    x.store(t)
