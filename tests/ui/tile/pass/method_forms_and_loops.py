import math

from buildtile import tile
from buildtile.types import Tensor, bf16, f32


@tile.kernel(specialize=[{"z": [16, 64]}])
def k(x: Tensor[bf16, 2], scale: f32, z: tile.Out[f32, 2]):
    """Methods on tiles, keepdims, a loop carrying a tile, casts of scalars."""
    acc = tile.zeros(z.tile_shape, f32)
    for k in tile.range(0, tile.cdiv(x.shape[1], 64), 1):
        t = tile.load(x, (z.tile_id(0), k), (16, 64), padding=-math.inf).astype(f32)
        acc = acc + t.max(axis=1, keepdims=True) - tile.exp(t - t.max(axis=1)[:, None]).sum(axis=1, keepdims=True)
    z.store(acc.permute((0, 1)) * scale + f32(z.num_tiles(0)))
