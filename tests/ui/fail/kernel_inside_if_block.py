# expect: BT0430 15:6
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32

FAST = True


@simt.kernel(block=256)
def copy(x: Slice[f32], y: DisjointSlice[f32]):
    i = simt.index_1d()
    y[i] = x[i]


if FAST:
    @simt.kernel(block=256)
    def scale(x: Slice[f32], y: DisjointSlice[f32]):
        i = simt.index_1d()
        y[i] = 2.0 * x[i]
