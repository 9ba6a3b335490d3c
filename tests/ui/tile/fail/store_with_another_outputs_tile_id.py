# expect: BT0499 9:20
from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [128], "w": [64]}])
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1], w: tile.Out[f32, 1]):
    z.store(tile.load_like(x, z))
    tile.store(w, (z.tile_id(0),), tile.zeros((64,), f32))
