# expect: BT0594 8:5
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256)
def k(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]):
    a = b
    i = simt.index_1d()
    c[i] = a[i]
