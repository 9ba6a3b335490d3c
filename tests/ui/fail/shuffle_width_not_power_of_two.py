# expect: BT0308 10:36 BT0308 11:34 BT0308 12:35
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=64)
def k(x: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    v = x[i]
    a = simt.shfl_down(v, 1, width=12)
    b = simt.shfl_up(v, 1, width=64)
    d = simt.shfl_xor(v, 1, lanes=8)
    c[i] = a + b + d
