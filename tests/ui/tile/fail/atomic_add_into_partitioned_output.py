# expect: BT0308 10:21
from buildtile import tile
from buildtile.types import Tensor, f32, i32


@tile.kernel(specialize=[{"z": [128]}])
def k(x: Tensor[f32, 1], idx: Tensor[i32, 1], z: tile.Out[f32, 1]):
    t = tile.load_like(x, z)
    z.store(t)
    tile.atomic_add(z, tile.load_like(idx, z), t)
