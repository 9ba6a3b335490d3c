# expect: BT0308 13:24
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.function
def first_tile(x):
    return tile.load(x, (0,), (128,))


@tile.kernel(specialize=[{"z": [128]}])
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    z.store(first_tile(x))
