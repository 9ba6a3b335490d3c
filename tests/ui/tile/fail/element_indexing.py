# expect: BT0200 8:32
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    z.store(tile.full((1024,), x[0], f32))
