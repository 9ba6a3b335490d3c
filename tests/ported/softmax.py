"""Row softmax with one warp per row, as PyTorch's and apex's "persistent" softmax kernels do it:
the lanes stride over the row, the maximum and the sum are reduced with butterfly shuffles
(``__shfl_xor_sync``), and every lane ends with both."""

import math

from buildtile import simt
from buildtile.types import DisjointTensor, Tensor, f32

WARP = 32
ROWS_PER_BLOCK = 4


@simt.device
def warp_max(v: f32) -> f32:
    offset = WARP // 2
    while offset > 0:
        v = max(v, simt.shfl_xor(v, offset))
        offset //= 2
    return v


@simt.device
def warp_sum(v: f32) -> f32:
    offset = WARP // 2
    while offset > 0:
        v += simt.shfl_xor(v, offset)
        offset //= 2
    return v


@simt.kernel(block=(WARP, ROWS_PER_BLOCK), requires=["x.shape[0] == out.shape[0]", "x.shape[1] == out.shape[1]"])
def softmax_warp(x: Tensor[f32, 2], out: DisjointTensor[f32, 2]):
    row = simt.block_idx.x * ROWS_PER_BLOCK + simt.thread_idx.y
    lane = simt.thread_idx.x
    cols = x.shape[1]
    valid = row < x.shape[0]
    m = -math.inf
    if valid:
        for c in range(lane, cols, WARP):
            m = max(m, x[row, c])
    m = warp_max(m)
    total = f32(0.0)
    if valid:
        for c in range(lane, cols, WARP):
            total += math.exp(x[row, c] - m)
    total = warp_sum(total)
    if valid:
        with simt.unsafe():
            for c in range(lane, cols, WARP):
                out[row, c] = math.exp(x[row, c] - m) / total
