# expect: BT0431 7:5
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256)
def check_abi(x: Slice[f32], y: DisjointSlice[f32]):
    i = simt.index_1d()
    y[i] = x[i]
