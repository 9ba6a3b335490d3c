# expect: BT0428 13:5
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256)
def scale(x: Slice[f32], y: DisjointSlice[f32]):
    i = simt.index_1d()
    y[i] = 2.0 * x[i]


@simt.kernel(block=128)
def scale_block(x: Slice[f32], y: DisjointSlice[f32]):
    i = simt.index_1d()
    y[i] = 3.0 * x[i]
