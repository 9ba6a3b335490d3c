# expect: BT0133 13:12
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=64)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    with simt.unsafe():
        buf = simt.shared_array(f32, 64)
        buf[simt.thread_idx.x] = 1.0
        simt.sync_threads()
    c[i] = buf[0]
