# expect: BT0594 9:5
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [128]}])
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1], acc: tile.Atomic[f32, 1]):
    z.store(tile.load_like(x, z))
    tile.store(acc, (z.tile_id(0),), tile.load_like(x, z))
