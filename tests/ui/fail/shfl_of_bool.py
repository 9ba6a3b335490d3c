# expect: BT0308 10:27
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256)
def k(x: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    neg = x[i] < 0.0
    other = simt.shfl_xor(neg, 1)
    c[i] = 1.0 if other else 0.0
