# expect: BT0308 8:37
from buildtile import tile
from buildtile.types import Tensor, u16


@tile.kernel(specialize=[{"z": [256]}])
def k(x: Tensor[u16, 1], z: tile.Out[u16, 1]):
    z.store(tile.load_like(x, z) << 16)
