"""CUDA samples' ``reduction``: reduce3 (two loads per thread, a shared-memory tree in unsigned
arithmetic, extern shared memory) and the shuffle reduction of "Faster parallel reductions on
Kepler" (grid-stride sum, warp shuffles down, one atomic per warp)."""

from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, Slice, f32, u32

BLOCK = 256


@simt.kernel(block=BLOCK, dynamic_shared=BLOCK * 4)
def reduce3(g_idata: Slice[f32], g_odata: DisjointSlice[f32], n: u32):
    """g_odata[b] = the sum of the 2 * BLOCK elements of block b."""
    with simt.unsafe():
        sdata = simt.dynamic_shared_array(f32)
        tid = u32(simt.thread_idx.x)
        i = u32(simt.block_idx.x) * (u32(simt.block_dim.x) * 2) + tid
        my_sum = g_idata[i] if i < n else 0.0
        if i + u32(simt.block_dim.x) < n:
            my_sum += g_idata[i + u32(simt.block_dim.x)]
        sdata[tid] = my_sum
        simt.sync_threads()
        s = u32(simt.block_dim.x) // 2
        while s > 0:
            if tid < s:
                my_sum = my_sum + sdata[tid + s]
                sdata[tid] = my_sum
            simt.sync_threads()
            s >>= 1
        if tid == 0:
            g_odata[simt.block_idx.x] = my_sum


@simt.device
def warp_reduce_sum(val: f32) -> f32:
    offset = 16
    while offset > 0:
        val += simt.shfl_down(val, offset)
        offset //= 2
    return val


@simt.kernel(block=BLOCK)
def device_reduce_warp_atomic(inp: Slice[f32], out: AtomicSlice[f32]):
    """out[0] += the sum of inp."""
    total = f32(0.0)
    for i in range(simt.grid(1), len(inp), simt.gridsize(1)):
        total += inp[i]
    total = warp_reduce_sum(total)
    if simt.lane_id() == 0:
        out.atomic_add(0, total)
