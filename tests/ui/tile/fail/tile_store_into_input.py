# expect: BT0594 9:5
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    i = z.tile_id(0)
    tile.store(x, (i,), tile.load_like(x, z))
