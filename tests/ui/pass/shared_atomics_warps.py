from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, Slice, f32, i32, u32

BLOCK = 256


@simt.kernel(block=BLOCK)
def block_sum(x: Slice[f32], partial: DisjointSlice[f32], total: AtomicSlice[f32]):
    """Per-block sums (warp shuffles + shared memory), also added atomically into total[0]."""
    i = simt.index_1d()
    v = x[i] if i < len(x) else 0.0
    offset = 16
    while offset > 0:
        v += simt.shfl_down(v, offset)
        offset = offset // 2
    with simt.unsafe():
        warp_sums = simt.shared_array(f32, BLOCK // 32)
        if simt.lane_id() == 0:
            warp_sums[simt.warp_id()] = v
        simt.sync_threads()
        if simt.thread_idx.x == 0:
            s = 0.0
            for w in range(BLOCK // 32):
                s += warp_sums[w]
            total.atomic_add(0, s)
    if simt.thread_idx.x == 0:
        partial[i] = v


@simt.kernel(block=128)
def histogram(values: Slice[i32], bins: AtomicSlice[u32], hits: DisjointSlice[u32]):
    i = simt.index_1d()
    if i < len(values):
        b = values[i]
        old = bins.atomic_add(b, u32(1))
        bins.atomic_max(0, old)
        mask = simt.ballot(b % 2 == 0)
        if simt.any(b < 0) or simt.all(b > 100):
            hits[i] = mask
        else:
            hits[i] = bins.atomic_cas(1, u32(0), u32(0))
