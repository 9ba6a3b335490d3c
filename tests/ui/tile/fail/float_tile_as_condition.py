# expect: BT0308 9:24
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [256]}])
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    t = tile.load_like(x, z)
    z.store(tile.where(t, t, 0.0))
