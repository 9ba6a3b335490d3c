# expect: BT0594 8:5
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    x = tile.load_like(x, z)
    z.store(x)
