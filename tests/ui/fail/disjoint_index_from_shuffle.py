# expect: BT0499 10:7
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    j = simt.shfl_down(i, 1)
    c[j] = 1.0
