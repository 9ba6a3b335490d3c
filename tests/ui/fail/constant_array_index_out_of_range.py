# expect: BT0600 11:26
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32

COEFFS = (1.0, 2.5, 3.0)


@simt.kernel(block=64)
def k(x: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    c[i] = x[i] * COEFFS[3]
