# expect: BT0308 9:5
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i64


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    a, b = 1.0, 2.0, 3.0
    c[i] = a
