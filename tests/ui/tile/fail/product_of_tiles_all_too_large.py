# expect: BT0600 5:8
from buildtile import tile
from buildtile.types import Tensor, f32

WIDE = tile.product(shape=("rows", "cols"), rows=[64, 128], cols=[1024], max_elements=4096)


@tile.kernel(specialize=WIDE)
def k(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    z.store(tile.load_like(x, z))
