# expect: BT0425 12:13
from buildtile import tile
from buildtile.types import Tensor, f32


def double(t):
    return t * 2.0


@tile.kernel(specialize=[{"z": [128]}])
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    z.store(double(tile.load_like(x, z)))
