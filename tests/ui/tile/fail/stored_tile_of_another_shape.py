# expect: BT0308 8:5
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [128]}])
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    z.store(tile.load(x, (z.tile_id(0),), (256,)))
