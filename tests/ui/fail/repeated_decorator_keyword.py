# expect: BT0415 6:24
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=64, block=128)
def copy(x: Slice[f32], y: DisjointSlice[f32]):
    i = simt.index_1d()
    y[i] = x[i]
