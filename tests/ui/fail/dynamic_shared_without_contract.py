# expect: BT0600 6:2
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=128)
def k(out: DisjointSlice[f32]):
    i = simt.index_1d()
    with simt.unsafe():
        buf = simt.dynamic_shared_array(f32)
        buf[simt.thread_idx.x] = 1.0
    out[i] = 1.0
