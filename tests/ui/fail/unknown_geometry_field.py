# expect: BT0425 9:12
from buildtile import simt
from buildtile.types import DisjointSlice, i64


@simt.kernel(block=256)
def k(c: DisjointSlice[i64]):
    i = simt.index_1d()
    c[i] = simt.thread_idx.w
