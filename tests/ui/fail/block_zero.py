# expect: BT0600 6:20
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=0)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    c[i] = 1.0
