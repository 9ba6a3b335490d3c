"""Prefix sums: the work-efficient (Blelloch) exclusive scan of one block's 2 * BLOCK elements
in shared memory (GPU Gems 3, chapter 39), and CUDA samples' ``shfl_scan``: an inclusive scan
of each block with warp shuffles up, the warps' totals scanned by the first warp."""

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i32, u32

BLOCK = 128
WARP = 32


@simt.kernel(block=BLOCK)
def prescan(g_idata: Slice[f32], g_odata: DisjointSlice[f32], block_sums: DisjointSlice[f32]):
    """g_odata = the exclusive scan of each 2 * BLOCK elements; block_sums[b] = block b's total."""
    n = 2 * BLOCK
    thid = simt.thread_idx.x
    base = simt.block_idx.x * n
    with simt.unsafe():
        temp = simt.shared_array(f32, 2 * BLOCK)
        temp[2 * thid] = g_idata[base + 2 * thid] if base + 2 * thid < len(g_idata) else 0.0
        temp[2 * thid + 1] = g_idata[base + 2 * thid + 1] if base + 2 * thid + 1 < len(g_idata) else 0.0
        offset = 1
        d = n >> 1
        while d > 0:                       # up-sweep: build sums in place
            simt.sync_threads()
            if thid < d:
                ai = offset * (2 * thid + 1) - 1
                bi = offset * (2 * thid + 2) - 1
                temp[bi] += temp[ai]
            offset *= 2
            d >>= 1
        if thid == 0:
            block_sums[simt.block_idx.x] = temp[n - 1]
            temp[n - 1] = 0
        d = 1
        while d < n:                       # down-sweep
            offset >>= 1
            simt.sync_threads()
            if thid < d:
                ai = offset * (2 * thid + 1) - 1
                bi = offset * (2 * thid + 2) - 1
                t = temp[ai]
                temp[ai] = temp[bi]
                temp[bi] += t
            d *= 2
        simt.sync_threads()
        g_odata[base + 2 * thid] = temp[2 * thid]
        g_odata[base + 2 * thid + 1] = temp[2 * thid + 1]


@simt.kernel(block=BLOCK, requires=["len(partial_sums) * BLOCK >= len(data)"])
def shfl_scan(data: DisjointSlice[i32], partial_sums: DisjointSlice[i32]):
    """data (in place) = its inclusive scan within each block; partial_sums[b] = block b's total."""
    sums_count = BLOCK // WARP
    id = simt.index_1d()
    lane_id = i32(simt.lane_id())
    warp_id = simt.warp_id()
    value = data[id] if id < len(data) else 0
    i = 1
    while i <= WARP:                       # inclusive scan within the warp
        n = simt.shfl_up(value, i32(i), width=WARP)
        if lane_id >= i:
            value += n
        i *= 2
    with simt.unsafe():
        sums = simt.shared_array(i32, BLOCK // WARP)
        if simt.thread_idx.x % WARP == WARP - 1:
            sums[warp_id] = value
        simt.sync_threads()
        if warp_id == 0 and lane_id < sums_count:
            warp_sum = sums[lane_id]
            mask = (1 << sums_count) - 1
            i = 1
            while i <= sums_count:
                n = simt.shfl_up(warp_sum, i32(i), width=BLOCK // WARP, mask=u32(mask))
                if lane_id >= i:
                    warp_sum += n
                i *= 2
            sums[lane_id] = warp_sum
        simt.sync_threads()
        block_sum = 0
        if warp_id > 0:
            block_sum = sums[warp_id - 1]
        value += block_sum
        data[id] = value
        if simt.thread_idx.x == BLOCK - 1:
            partial_sums[simt.block_idx.x] = value
