# expect: BT0600 6:54
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=tile.product(shape=("n",), n=[128, 100]))
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    z.store(tile.load_like(x, z))
