# expect: BT0600 6:46
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [128]}, {"z": [100]}])
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    z.store(tile.load_like(x, z))
