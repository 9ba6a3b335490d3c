# expect: BT0600 13:15
# targets: sm_75, sm_80
from buildtile import tile
from buildtile.types import Tensor, f16, f32


@tile.kernel(specialize=[{"c": [64, 64]}, {"c": [128, 128]}])
def matmul(a: Tensor[f16, 2], b: Tensor[f16, 2], c: tile.Out[f32, 2]):
    acc = tile.zeros(c.tile_shape, f32)
    for k in tile.range(tile.cdiv(a.shape[1], 32)):
        ta = tile.load(a, (c.tile_id(0), k), (c.tile_shape[0], 32))
        tb = tile.load(b, (k, c.tile_id(1)), (32, c.tile_shape[1]))
        acc = tile.mma(ta, tb, acc)
    c.store(acc)
