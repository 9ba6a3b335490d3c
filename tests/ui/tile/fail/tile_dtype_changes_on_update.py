# expect: BT0308 9:5
from buildtile import tile
from buildtile.types import Tensor, f16, f32


@tile.kernel(specialize=[{"z": [256]}])
def k(x: Tensor[f32, 1], z: tile.Out[f16, 1]):
    acc = tile.zeros((256,), f16)
    acc += tile.load_like(x, z)
    z.store(acc)
