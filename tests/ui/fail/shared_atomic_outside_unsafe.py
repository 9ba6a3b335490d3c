# expect: BT0133 13:5
from buildtile import simt
from buildtile.types import DisjointSlice, u32


@simt.kernel(block=64)
def k(c: DisjointSlice[u32]):
    i = simt.index_1d()
    with simt.unsafe():
        counts = simt.shared_array(u32, 8)
        counts[simt.thread_idx.x % 8] = u32(0)
        simt.sync_threads()
    counts.atomic_add(i % 8, u32(1))
    c[i] = u32(1)
