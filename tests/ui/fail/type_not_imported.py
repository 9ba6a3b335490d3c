# expect: BT0308 9:10 BT0308 9:31
from numba import float32

from buildtile import simt
from buildtile.types import DisjointSlice, Slice


@simt.kernel(block=128)
def k(x: Slice[float32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    out[i] = x[i]
