# expect: BT0200 9:5
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256)
def k(x: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    try:
        c[i] = x[i]
    except IndexError:
        c[i] = 0.0
