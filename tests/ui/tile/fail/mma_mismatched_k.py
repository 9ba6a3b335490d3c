# expect: BT0308 10:13
from buildtile import tile
from buildtile.types import Tensor, f16, f32


@tile.kernel(specialize=[{"c": [64, 64]}])
def k(a: Tensor[f16, 2], b: Tensor[f16, 2], c: tile.Out[f32, 2]):
    ta = tile.load(a, (c.tile_id(0), 0), (64, 32))
    tb = tile.load(b, (0, c.tile_id(1)), (16, 64))
    c.store(tile.mma(ta, tb, tile.zeros((64, 64), f32)))
