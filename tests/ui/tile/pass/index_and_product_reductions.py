import math

from buildtile import tile
from buildtile.types import Tensor, bf16, f16, f32, i32, i64

T = tile.dtype_var("T", f32, f16, bf16)
CHUNK = 256


@tile.kernel(specialize=[{"best": [4], "value": [4], "scale": [4]}, {"best": [1], "value": [1], "scale": [1]}])
def row_argmax(x: Tensor[T, 2], best: tile.Out[i64, 1], value: tile.Out[T, 1], scale: tile.Out[f32, 1]):
    """A row in chunks: argmax of each chunk, offset by the chunk's first column, kept as a
    running (value, index) pair; the index gathers the value back, and feeds arithmetic."""
    rows = best.tile_shape[0]
    row_ids = best.tile_id(0) * rows + tile.arange(rows)
    top = tile.full((rows,), -math.inf, f32)
    where = tile.zeros((rows,), i32)
    for k in tile.range(tile.cdiv(x.shape[1], CHUNK)):
        chunk = tile.load(x, (best.tile_id(0), k), (rows, CHUNK), padding=-math.inf)
        index = k * CHUNK + tile.argmax(chunk, axis=1)
        found = tile.gather(x, (row_ids, index)).astype(f32)
        where = tile.where(found > top, index, where)
        top = tile.maximum(top, found)
    best.store(where.astype(i64))
    value.store(top.astype(T))
    first = tile.load(x, (best.tile_id(0), 0), (rows, CHUNK), padding=1.0)
    spread = (first.argmax(axis=-1, keepdims=True) - tile.argmin(first, 1, True)).astype(f32)
    scale.store(tile.prod(first.astype(f32), axis=1) + tile.sum(spread, axis=1))
