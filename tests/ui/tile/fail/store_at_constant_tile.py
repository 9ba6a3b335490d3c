# expect: BT0499 8:20
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    tile.store(z, (0,), tile.load_like(x, z))
