# expect: BT0200 9:15
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    weights = [0.25, 0.5, 0.25]
    c[i] = 1.0
