# expect: BT0499 10:11
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256)
def shifted(a: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    if i + 1 < len(c):
        c[i + 1] = a[i]
