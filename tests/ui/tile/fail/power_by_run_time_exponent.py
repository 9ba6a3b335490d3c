# expect: BT0200 9:5
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [256]}])
def k(x: Tensor[f32, 1], e: f32, z: tile.Out[f32, 1]):
    v = tile.load_like(x, z)
    v **= e
    z.store(v)
