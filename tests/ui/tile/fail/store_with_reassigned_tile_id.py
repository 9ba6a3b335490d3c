# expect: BT0499 11:20
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    i = z.tile_id(0)
    if x.shape[0] > 4096:
        i = i - 1
    tile.store(z, (i,), tile.load_like(x, z))
