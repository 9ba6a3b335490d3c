# expect: BT0308 9:12
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256)
def k(a: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    c[i] = f32(a[i], 2.0)
