# expect: BT0200 8:12
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.function
def halve(t, n):
    return halve(t * 0.5, n - 1)


@tile.kernel(specialize=[{"z": [128]}])
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    z.store(halve(tile.load_like(x, z), 3))
