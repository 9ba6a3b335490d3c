# expect: BT0200 9:9
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.function
def relu(t, on):
    if on:
        return tile.maximum(t, 0.0)
    return t


@tile.kernel(specialize=[{"z": [128]}])
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    z.store(relu(tile.load_like(x, z), True))
