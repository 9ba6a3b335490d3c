# expect: BT0308 7:47
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [4, 256], "mean": [8]}])
def k(x: Tensor[f32, 2], z: tile.Out[f32, 2], mean: tile.Out[f32, 1]):
    t = tile.load_like(x, z)
    z.store(t)
    mean.store(tile.sum(t, axis=1) / 256.0)
