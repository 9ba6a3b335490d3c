# expect: BT0308 9:13
from buildtile import tile
from buildtile.types import Tensor, i8, u8


@tile.kernel(specialize=[{"z": [256]}])
def k(x: Tensor[i8, 1], s: Tensor[u8, 1], z: tile.Out[i8, 1]):
    amount = tile.load_like(s, z)
    z.store(tile.load_like(x, z) >> amount)
