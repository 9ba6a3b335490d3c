# expect: BT0308 9:12
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, i32, u32


@simt.kernel(block=256)
def k(a: Slice[u32], b: Slice[i32], c: DisjointSlice[u32]):
    i = simt.index_1d()
    c[i] = a[i] + b[i]
