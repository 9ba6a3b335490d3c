# expect: BT0308 9:5
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=64)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    simt.syncwarp(0xffff, 0xffff)
    c[i] = 1.0
