# expect: BT0499 12:7
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    j = 0
    if i < len(c):
        j = i
    c[j] = 1.0
