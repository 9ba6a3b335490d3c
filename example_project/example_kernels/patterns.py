"""Classic SIMT patterns: reductions, shared-memory tiles, atomics, stencils.

Code inside ``with simt.unsafe():`` uses shared memory and block-level
indexing, which the ownership checker cannot prove disjoint; everything
outside it is checked.
"""

import math

from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, DisjointTensor, Slice, Tensor, f32, i32, i64, u32

#: threads per block of the reductions; a multiple of the 32-lane warp
REDUCE_BLOCK = 256
WARPS = REDUCE_BLOCK // 32
#: transpose tile edge, and the rows of it one block-row of threads covers per step
TILE = 32
TILE_ROWS = 8
SOFTMAX_BLOCK = 128
SOFTMAX_WARPS = SOFTMAX_BLOCK // 32


@simt.device
def warp_sum(v: f32) -> f32:
    offset = 16
    while offset > 0:
        v += simt.shfl_xor(v, offset)
        offset //= 2
    return v


@simt.device
def warp_max(v: f32) -> f32:
    offset = 16
    while offset > 0:
        v = max(v, simt.shfl_xor(v, offset))
        offset //= 2
    return v


@simt.kernel(block=REDUCE_BLOCK, requires=["len(partial) * 256 >= len(x)"])
def block_sum(x: Slice[f32], partial: DisjointSlice[f32]):
    """partial[b] = sum of block b's elements of x (warp shuffles, then shared memory)."""
    i = simt.index_1d()
    v = warp_sum(x[i] if i < len(x) else 0.0)
    with simt.unsafe():
        warp_totals = simt.shared_array(f32, WARPS)
        if simt.lane_id() == 0:
            warp_totals[simt.warp_id()] = v
        simt.sync_threads()
        if simt.warp_id() == 0:
            total = warp_sum(warp_totals[simt.lane_id()] if simt.lane_id() < WARPS else 0.0)
            if simt.lane_id() == 0:
                partial[simt.block_idx.x] = total


@simt.kernel(block=(TILE, TILE_ROWS), requires=["a.shape[0] == out.shape[1]", "a.shape[1] == out.shape[0]"])
def transpose_tiled(a: Tensor[f32, 2], out: DisjointTensor[f32, 2]):
    """out = a.T through a padded shared-memory tile: both global accesses coalesced."""
    with simt.unsafe():
        tile = simt.shared_array(f32, TILE * (TILE + 1))
        col0 = simt.block_idx.x * TILE
        row0 = simt.block_idx.y * TILE
        tx = simt.thread_idx.x
        ty = simt.thread_idx.y
        for k in range(0, TILE, TILE_ROWS):
            r = row0 + ty + k
            c = col0 + tx
            if r < a.shape[0] and c < a.shape[1]:
                tile[(ty + k) * (TILE + 1) + tx] = a[r, c]
        simt.sync_threads()
        for k in range(0, TILE, TILE_ROWS):
            r = col0 + ty + k
            c = row0 + tx
            if r < out.shape[0] and c < out.shape[1]:
                out[r, c] = tile[tx * (TILE + 1) + ty + k]


@simt.kernel(block=256)
def histogram(values: Slice[i32], bins: AtomicSlice[u32]):
    """bins[v] += 1 for every value v; values outside the bins are ignored."""
    i = simt.index_1d()
    if i < len(values):
        v = values[i]
        if v >= 0 and i64(v) < len(bins):
            bins.atomic_add(v, u32(1))


@simt.kernel(block=SOFTMAX_BLOCK, requires=["x.shape[0] == out.shape[0]", "x.shape[1] == out.shape[1]"])
def softmax_rows(x: Tensor[f32, 2], out: DisjointTensor[f32, 2]):
    """One block per row: max and sum reduced across the block, exp(x - max) / sum."""
    row = simt.block_idx.x
    tid = simt.thread_idx.x
    ncols = x.shape[1]
    if row >= x.shape[0]:
        return
    m = -3.0e38
    for c in range(tid, ncols, SOFTMAX_BLOCK):
        m = max(m, x[row, c])
    m = warp_max(m)
    with simt.unsafe():
        scratch = simt.shared_array(f32, SOFTMAX_WARPS)
        if simt.lane_id() == 0:
            scratch[simt.warp_id()] = m
        simt.sync_threads()
        m = scratch[0]
        for w in range(1, SOFTMAX_WARPS):
            m = max(m, scratch[w])
        simt.sync_threads()
        s = 0.0
        for c in range(tid, ncols, SOFTMAX_BLOCK):
            s += math.exp(x[row, c] - m)
        s = warp_sum(s)
        if simt.lane_id() == 0:
            scratch[simt.warp_id()] = s
        simt.sync_threads()
        total = 0.0
        for w in range(SOFTMAX_WARPS):
            total += scratch[w]
        inv = 1.0 / total
        for c in range(tid, ncols, SOFTMAX_BLOCK):
            out[row, c] = math.exp(x[row, c] - m) * inv


@simt.kernel(block=(32, 4, 2), requires=[
    "u.shape[0] == out.shape[0]", "u.shape[1] == out.shape[1]", "u.shape[2] == out.shape[2]"])
def laplacian_3d(u: Tensor[f32, 3], out: DisjointTensor[f32, 3]):
    """7-point Laplacian inside the volume; the boundary copies u."""
    z, y, x = simt.index_3d()
    nz = u.shape[0]
    ny = u.shape[1]
    nx = u.shape[2]
    if z < nz and y < ny and x < nx:
        if z > 0 and z < nz - 1 and y > 0 and y < ny - 1 and x > 0 and x < nx - 1:
            out[z, y, x] = (u[z - 1, y, x] + u[z + 1, y, x] + u[z, y - 1, x] + u[z, y + 1, x]
                            + u[z, y, x - 1] + u[z, y, x + 1] - 6.0 * u[z, y, x])
        else:
            out[z, y, x] = u[z, y, x]


@simt.kernel(block=REDUCE_BLOCK)
def sum_partials(x: Slice[f32], partial: DisjointSlice[f32]):
    """partial[b] = block b's share of sum(x): each thread strides over the whole input
    (four independent loads in flight per step), then the block reduces its threads."""
    i = simt.index_1d()
    stride = simt.grid_dim.x * REDUCE_BLOCK
    k = i
    acc0 = 0.0
    acc1 = 0.0
    acc2 = 0.0
    acc3 = 0.0
    while k + 3 * stride < len(x):
        acc0 += x[k]
        acc1 += x[k + stride]
        acc2 += x[k + 2 * stride]
        acc3 += x[k + 3 * stride]
        k += 4 * stride
    while k < len(x):
        acc0 += x[k]
        k += stride
    v = warp_sum((acc0 + acc1) + (acc2 + acc3))
    with simt.unsafe():
        warp_totals = simt.shared_array(f32, WARPS)
        if simt.lane_id() == 0:
            warp_totals[simt.warp_id()] = v
        simt.sync_threads()
        if simt.warp_id() == 0:
            total = warp_sum(warp_totals[simt.lane_id()] if simt.lane_id() < WARPS else 0.0)
            if simt.lane_id() == 0:
                partial[simt.block_idx.x] = total


#: consecutive elements each thread of sum_total reads per load (one 128-bit load of f32
#: from the aligned entry), and the loads each thread has in flight per step
SUM_VECTOR = 4
SUM_IN_FLIGHT = 4
#: blocks of sum_total each SM keeps resident (2048 threads: a full SM); the register budget
#: this leaves (32 per thread) still holds every load of a step
SUM_BLOCKS_PER_SM = 8


@simt.kernel(block=REDUCE_BLOCK, min_blocks=SUM_BLOCKS_PER_SM, requires=["len(total) == 1"])
def sum_total(x: Slice[f32], total: AtomicSlice[f32]):
    """total[0] += sum(x), in one kernel: each thread reads SUM_VECTOR consecutive elements
    per load, SUM_IN_FLIGHT loads per step over a grid-stride loop, then the block reduces
    its threads (warp shuffles, shared memory) and adds its share with one atomic.

    Reads of consecutive elements become 128-bit loads in the aligned entry, which the host
    launches whenever ``x``'s data is 16-byte aligned; a misaligned view gives the same sum."""
    n = len(x)
    # thread t's load j of a step reads group g = t + j * groups of SUM_VECTOR elements; the
    # group's first element is SUM_VECTOR * g, a product the compiler sees is 16-byte aligned
    groups = simt.grid_dim.x * REDUCE_BLOCK
    g = simt.block_idx.x * REDUCE_BLOCK + simt.thread_idx.x
    acc0 = 0.0
    acc1 = 0.0
    acc2 = 0.0
    acc3 = 0.0
    # the body spells out SUM_IN_FLIGHT loads of SUM_VECTOR elements each
    while SUM_VECTOR * (g + (SUM_IN_FLIGHT - 1) * groups + 1) <= n:   # every load of the step in bounds
        a = SUM_VECTOR * g
        b = SUM_VECTOR * (g + groups)
        c = SUM_VECTOR * (g + 2 * groups)
        d = SUM_VECTOR * (g + 3 * groups)
        acc0 += (x[a] + x[a + 1]) + (x[a + 2] + x[a + 3])
        acc1 += (x[b] + x[b + 1]) + (x[b + 2] + x[b + 3])
        acc2 += (x[c] + x[c + 1]) + (x[c + 2] + x[c + 3])
        acc3 += (x[d] + x[d + 1]) + (x[d + 2] + x[d + 3])
        g += SUM_IN_FLIGHT * groups
    k = SUM_VECTOR * g
    while k < n:                                               # the ragged end, element by element
        for j in range(SUM_VECTOR):
            if k + j < n:
                acc0 += x[k + j]
        k += SUM_VECTOR * groups
    v = warp_sum((acc0 + acc1) + (acc2 + acc3))
    with simt.unsafe():
        warp_totals = simt.shared_array(f32, WARPS)
        if simt.lane_id() == 0:
            warp_totals[simt.warp_id()] = v
        simt.sync_threads()
        if simt.warp_id() == 0:
            block_total = warp_sum(warp_totals[simt.lane_id()] if simt.lane_id() < WARPS else 0.0)
            if simt.lane_id() == 0:
                total.atomic_add(0, block_total)


@simt.kernel(block=REDUCE_BLOCK, dynamic_shared=REDUCE_BLOCK * 4)
def reverse_blocks(x: Slice[f32], out: DisjointSlice[f32]):
    """Each block's chunk of x, reversed, staged through dynamic shared memory."""
    i = simt.index_1d()
    t = simt.thread_idx.x
    with simt.unsafe():
        stage = simt.dynamic_shared_array(f32)
        stage[t] = x[i] if i < len(x) else 0.0
        simt.sync_threads()
        if i < len(out):
            out[i] = stage[REDUCE_BLOCK - 1 - t]
