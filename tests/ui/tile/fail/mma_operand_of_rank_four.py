# expect: BT0308 10:20
from buildtile import tile
from buildtile.types import Tensor, f16, f32


@tile.kernel(specialize=[{"s": [1, 1, 64, 64]}])
def scores(q: Tensor[f16, 4], k: Tensor[f16, 4], s: tile.Out[f32, 4]):
    qt = tile.load(q, (s.tile_id(0), s.tile_id(1), s.tile_id(2), 0), (1, 1, 64, 32))
    kt = tile.load(k, (s.tile_id(0), s.tile_id(1), s.tile_id(3), 0), (1, 1, 64, 32)).reshape((64, 32))
    acc = tile.mma(qt, kt.T, tile.zeros((64, 64), f32))
    s.store(acc.reshape((1, 1, 64, 64)))
