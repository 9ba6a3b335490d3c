# expect: BT0600 6:25
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize="row_tiles")
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    z.store(tile.load_like(x, z))
