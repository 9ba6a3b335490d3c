# expect: BT0308 14:15
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i64


@simt.device
def first(a: Slice[f32]) -> f32:
    return a[0]


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    v = first(c)
    c[i] = v
