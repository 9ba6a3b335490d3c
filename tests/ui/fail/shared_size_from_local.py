# expect: BT0308 12:39
from buildtile import simt
from buildtile.types import DisjointSlice, f32

BLOCK = 128


@simt.kernel(block=BLOCK)
def k(out: DisjointSlice[f32]):
    n = 2 * BLOCK
    with simt.unsafe():
        temp = simt.shared_array(f32, n)
        temp[simt.thread_idx.x] = 1.0
        simt.sync_threads()
        out[simt.index_1d()] = temp[0]
