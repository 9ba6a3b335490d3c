# expect: BT0425 8:28
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    z.store(tile.load_like(y, z))
