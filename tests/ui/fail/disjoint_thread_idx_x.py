# expect: BT0499 8:7
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    c[simt.thread_idx.x] = 1.0
