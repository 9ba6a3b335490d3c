# expect: BT0415 7:25
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256)
def copy(x: Slice[f32], x: DisjointSlice[f32]):
    i = simt.index_1d()
    x[i] = 1.0
