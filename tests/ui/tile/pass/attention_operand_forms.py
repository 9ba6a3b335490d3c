import math

from buildtile import tile
from buildtile.types import Tensor, bool_, f16, f32, i64


@tile.kernel(specialize=[{"out": [1, 1, 64, 64]}])
def attend(q: Tensor[f16, 4], k: Tensor[f16, 4], v: Tensor[f16, 4], scale: f32, causal: bool_,
           out: tile.Out[f16, 4]):
    """A query block loaded once (kept in shared memory), keys read transposed (`kt.T`) and values
    from 4-D loads reshaped to their last two axes (both copied ahead), a named mask built where
    the scores are, and a second mma whose A operand is computed from the first's result."""
    b, h, i = out.tile_id(0), out.tile_id(1), out.tile_id(2)
    qt = tile.load(q, (b, h, i, 0), (1, 1, 64, 64)).reshape((64, 64))
    row_max = tile.full((64,), -math.inf, f32)
    row_sum = tile.zeros((64,), f32)
    acc = tile.zeros((64, 64), f32)
    query = tile.arange(64, i64) + i * 64
    for j in tile.range(tile.cdiv(k.shape[2], 64)):
        kt = tile.load(k, (b, h, j, 0), (1, 1, 64, 64)).reshape((64, 64))
        vt = tile.load(v, (b, h, j, 0), (1, 1, 64, 64)).reshape((64, 64))
        s = tile.mma(qt, kt.T, tile.zeros((64, 64), f32)) * scale
        key = tile.arange(64, i64) + j * 64
        visible = (key[None, :] < k.shape[2]) & ((key[None, :] <= query[:, None]) | (not causal))
        s = tile.where(visible, s, -math.inf)
        new_max = tile.maximum(row_max, tile.max(s, axis=1))
        p = tile.exp(s - new_max[:, None])
        alpha = tile.exp(row_max - new_max)
        row_sum = row_sum * alpha + tile.sum(p, axis=1)
        acc = tile.mma(p.astype(f16), vt, acc * alpha[:, None])
        row_max = new_max
    out.store((acc / row_sum[:, None]).astype(f16).reshape((1, 1, 64, 64)))


@tile.kernel(specialize=[{"c": [64, 32]}])
def transposed_a(a: Tensor[f16, 2], b: Tensor[f16, 2], c: tile.Out[f32, 2]):
    """c = a^T @ b with a stored K x M: each step's block of a is read transposed."""
    acc = tile.zeros((64, 32), f32)
    for kk in tile.range(tile.cdiv(a.shape[0], 32)):
        at = tile.load(a, (kk, c.tile_id(0)), (32, 64))
        bt = tile.load(b, (kk, c.tile_id(1)), (32, 32))
        acc = tile.mma(at.T, bt, acc)
    c.store(acc)
