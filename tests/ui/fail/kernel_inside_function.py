# expect: BT0430 14:10
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256)
def copy(x: Slice[f32], y: DisjointSlice[f32]):
    i = simt.index_1d()
    y[i] = x[i]


def make(factor):
    for _ in range(1):
        @simt.kernel(block=256)
        def scale(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = factor * x[i]
    return scale
