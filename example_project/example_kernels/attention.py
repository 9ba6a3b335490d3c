"""Fused attention, forward: ``softmax(q @ k^T * scale) @ v`` without the score matrix in memory.

The FlashAttention algorithm, as the Triton tutorial (06-fused-attention) and
cuTile's attention sample write it. One block owns ``block_m`` query rows of
one (batch, head): it walks the keys in blocks of ``BLOCK_N``, computes their
scores with one ``tile.mma``, updates a running row maximum and sum of
exponentials (the online softmax), rescales its output accumulator and adds
the block's probabilities times the values with a second ``tile.mma``. Scores,
probabilities and the output stay in registers (f32); only ``q``, ``k`` and
``v`` are read, once each per block, and the output written once.

    from buildtile import tile
    from example_kernels import attention

    out = torch.empty_like(q)                       # (batch, heads, seq_q, head_dim)
    attention.attention(q, k, v, 1 / math.sqrt(d), True, tile.partition(out, [1, 1, 128, d])).sync_on(stream)

``q``, ``k`` and ``v`` are (batch, heads, seq, head_dim) in bf16 or f16 (one
dtype for all four arrays), head_dim 64 or 128; ``seq_q`` and ``seq_k`` may
differ and need not be multiples of the blocks. ``scale`` is positive. ``causal`` masks key ``j``
from query ``i`` where ``j > i`` (the upper-left triangle, as
``torch.nn.functional.scaled_dot_product_attention(is_causal=True)``), and a
causal block stops at the diagonal. The exponentials are ``exp2``, with
``log2(e)`` folded into the scale.
"""

import math

from buildtile import tile
from buildtile.types import Tensor, bf16, bool_, f16, f32, i64

LOG2E = 1.4426950408889634
#: keys (and values) per step of the loop
BLOCK_N = 64
#: the element type of q, k, v and the output: bf16 (the default) or f16
T = tile.dtype_var("T", bf16, f16)
#: one (batch, head) and 128 or 64 query rows a tile, for each head dimension
TILES = tile.product(shape=(1, 1, "rows", "head_dim"), rows=[128, 64], head_dim=[64, 128])


@tile.kernel(specialize=TILES,
             requires=["k.shape[0] == q.shape[0]", "k.shape[1] == q.shape[1]", "k.shape[3] == q.shape[3]",
                       "v.shape[0] == k.shape[0]", "v.shape[1] == k.shape[1]", "v.shape[2] == k.shape[2]",
                       "v.shape[3] == q.shape[3]", "out.shape[0] == q.shape[0]", "out.shape[1] == q.shape[1]",
                       "out.shape[2] == q.shape[2]", "out.shape[3] == q.shape[3]"])
def attention(q: Tensor[T, 4], k: Tensor[T, 4], v: Tensor[T, 4], scale: f32, causal: bool_, out: tile.Out[T, 4]):
    """``out = softmax(q @ k^T * scale) @ v`` per (batch, head), optionally causal."""
    _, _, rows, d = out.tile_shape
    b, h, i = out.tile_id(0), out.tile_id(1), out.tile_id(2)
    n_k = k.shape[2]
    qt = tile.load(q, (b, h, i, 0), (1, 1, rows, d)).reshape((rows, d))
    qk_scale = scale * LOG2E
    row_max = tile.full((rows,), -math.inf, f32)
    row_sum = tile.zeros((rows,), f32)
    acc = tile.zeros((rows, d), f32)
    query = tile.arange(rows, i64) + i * rows
    # a causal tile sees keys up to its last row; blocks from `masked` on need a mask
    end = min(n_k, (i + 1) * rows) if causal else n_k
    masked = min(n_k, i * rows) // BLOCK_N if causal else n_k // BLOCK_N
    for j in tile.range(tile.cdiv(end, BLOCK_N)):
        kt = tile.load(k, (b, h, j, 0), (1, 1, BLOCK_N, d)).reshape((BLOCK_N, d))
        vt = tile.load(v, (b, h, j, 0), (1, 1, BLOCK_N, d)).reshape((BLOCK_N, d))
        s = tile.mma(qt, kt.T, tile.zeros((rows, BLOCK_N), f32))
        if j >= masked:
            key = tile.arange(BLOCK_N, i64) + j * BLOCK_N
            visible = (key[None, :] < n_k) & ((key[None, :] <= query[:, None]) | (not causal))
            s = tile.where(visible, s, -math.inf)
        # the largest score of the raw product scales to the largest scaled one (scale > 0), and
        # each exponent is then one fused multiply-add
        new_max = tile.maximum(row_max, tile.max(s, axis=1) * qk_scale)
        p = tile.exp2(s * qk_scale - new_max[:, None])
        alpha = tile.exp2(row_max - new_max)
        row_sum = row_sum * alpha + tile.sum(p, axis=1)
        acc = tile.mma(p.astype(T), vt, acc * alpha[:, None])
        row_max = new_max
    out.store((acc / row_sum[:, None]).astype(T).reshape((1, 1, rows, d)))
