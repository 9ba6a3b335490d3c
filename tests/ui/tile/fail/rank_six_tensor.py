# expect: BT0308 7:10
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel
def k(x: Tensor[f32, 6], z: tile.Out[f32, 1]):
    z.store(tile.zeros(z.tile_shape, f32))
