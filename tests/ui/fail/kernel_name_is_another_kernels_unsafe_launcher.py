# expect: BT0428 13:5
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel
def copy(x: Slice[f32], y: DisjointSlice[f32]):
    i = simt.index_1d()
    y[i] = x[i]


@simt.kernel(block=256)
def copy_unsafe(x: Slice[f32], y: DisjointSlice[f32]):
    i = simt.index_1d()
    y[i] = x[i]
