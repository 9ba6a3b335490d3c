# expect: BT0308 7:57
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [256]}])
def relu_if(x: Tensor[f32, 1], z: tile.Out[f32, 1], on: bool):
    t = tile.load_like(x, z)
    z.store(tile.where(on, tile.maximum(t, 0.0), t))
