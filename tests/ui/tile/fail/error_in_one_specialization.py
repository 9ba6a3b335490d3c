# expect: BT0308 9:5
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [256]}, {"z": [1024]}])
def k(x: Tensor[f32, 2], z: tile.Out[f32, 1]):
    t = tile.load(x, (z.tile_id(0), 0), (16, 16))
    z.store(t.reshape(256))
