# expect: BT0499 10:19
from buildtile import tile
from buildtile.types import Tensor, f32, i32


@tile.kernel(specialize=[{"z": [128]}])
def k(x: Tensor[f32, 1], where: Tensor[i32, 1], z: tile.Out[f32, 1]):
    t = tile.load_like(x, z)
    idx = tile.load_like(where, z)
    tile.store(z, idx, t)
