# expect: BT0308 7:1
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel
def k(x: Tensor[f32, 1], y: Tensor[f32, 1]):
    pass
