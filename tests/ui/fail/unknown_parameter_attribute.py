# expect: BT0425 9:12
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256)
def k(x: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < x.length:
        c[i] = x[i]
