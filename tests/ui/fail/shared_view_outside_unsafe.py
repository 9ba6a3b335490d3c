# expect: BT0133 8:12
from buildtile import simt
from buildtile.types import DisjointSlice, SharedArray, f32


@simt.device
def first(buf: SharedArray[f32]) -> f32:
    return buf[0]


@simt.kernel(block=64)
def k(out: DisjointSlice[f32]):
    with simt.unsafe():
        buf = simt.shared_array(f32, 64)
        buf[simt.thread_idx.x] = 1.0
        simt.sync_threads()
        v = first(buf)
    i = simt.index_1d()
    if i < len(out):
        out[i] = v
