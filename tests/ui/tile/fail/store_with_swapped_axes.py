# expect: BT0499 9:20
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel
def k(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    i, j = z.tile_id(0), z.tile_id(1)
    tile.store(z, (j, i), tile.load_like(x, z))
