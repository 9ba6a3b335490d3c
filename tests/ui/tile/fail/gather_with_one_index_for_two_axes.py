# expect: BT0308 9:28
from buildtile import tile
from buildtile.types import Tensor, f32, i32


@tile.kernel(specialize=[{"z": [128]}])
def k(x: Tensor[f32, 2], where: Tensor[i32, 1], z: tile.Out[f32, 1]):
    at = tile.load_like(where, z)
    z.store(tile.gather(x, at))
