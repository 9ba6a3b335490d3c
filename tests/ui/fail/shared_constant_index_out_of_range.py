# expect: BT0600 10:37 BT0600 12:34
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=128)
def k(x: Slice[f32], out: DisjointSlice[f32]):
    with simt.unsafe():
        s = simt.shared_array(f32, (4, 128))
        s[0, simt.thread_idx.x] = x[-1]
        simt.sync_threads()
        out[simt.index_1d()] = s[4, 0] + s[0, 128]
