# expect: BT0499 9:20
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    t = tile.load_like(x, z)
    tile.store(z, (z.tile_id(0) + 1,), t)
