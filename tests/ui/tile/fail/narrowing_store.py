# expect: BT0308 8:5
from buildtile import tile
from buildtile.types import Tensor, f32, f16


@tile.kernel(specialize=[{"z": [256]}])
def k(x: Tensor[f32, 1], z: tile.Out[f16, 1]):
    z.store(tile.load_like(x, z) * 2.0)
