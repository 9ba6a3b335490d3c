# expect: BT0600 6:35
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256, requires=["len(a) + len(c)"])
def k(a: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    c[i] = a[i]
