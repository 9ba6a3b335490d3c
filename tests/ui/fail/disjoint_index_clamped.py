# expect: BT0499 9:7
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    c[min(i, len(c) - 1)] = 1.0
