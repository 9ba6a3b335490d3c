# expect: BT0308 9:29
from buildtile import tile
from buildtile.types import Tensor, f32, i64


@tile.kernel(specialize=[{"z": [128]}])
def k(x: Tensor[f32, 1], seed: i64, z: tile.Out[f32, 1]):
    t = tile.load_like(x, z)
    z.store(tile.rand(seed, t))
