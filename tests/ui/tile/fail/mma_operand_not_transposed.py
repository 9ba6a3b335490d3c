# expect: BT0308 11:19
from buildtile import tile
from buildtile.types import Tensor, f16, f32


@tile.kernel(specialize=[{"s": [64, 64]}])
def scores(q: Tensor[f16, 2], k: Tensor[f16, 2], s: tile.Out[f32, 2]):
    qt = tile.load(q, (s.tile_id(0), 0), (64, 32))
    kt = tile.load(k, (s.tile_id(1), 0), (64, 32))     # keys by head dim, as attention loads them
    acc = tile.zeros((64, 64), f32)
    s.store(acc + tile.mma(qt, kt, acc))
