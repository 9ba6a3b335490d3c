# expect: BT0600 6:44
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=tile.product(shape=("rows", "cols"), cols=[128]))
def k(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    z.store(tile.load_like(x, z))
