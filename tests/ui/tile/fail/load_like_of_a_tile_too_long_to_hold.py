# expect: BT0600 9:9
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [1, 65536]}])
def k(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    # a tile of 65,536 is written in chunks; it cannot be loaded whole
    t = tile.load_like(x, z)
    z.store(t)
