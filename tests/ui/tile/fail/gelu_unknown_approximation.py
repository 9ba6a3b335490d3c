# expect: BT0308 8:57
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [256]}])
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    z.store(tile.gelu(tile.load_like(x, z), approximate="erf"))
