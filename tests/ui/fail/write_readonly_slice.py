# expect: BT0594 11:9
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256)
def bad(a: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(c):
        c[i] = a[i]
        a[i] = 0.0
