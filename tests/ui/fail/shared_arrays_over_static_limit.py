# expect: BT0600 10:13
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256)
def k(out: DisjointSlice[f32]):
    with simt.unsafe():
        a = simt.shared_array(f32, 8192)
        b = simt.shared_array(f32, (64, 65))
        a[simt.thread_idx.x] = 1.0
        b[0, simt.thread_idx.x % 64] = 2.0
        simt.sync_threads()
        out[simt.index_1d()] = a[0] + b[0, 1]
