# expect: BT0600 6:33
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256, threads=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    c[i] = 1.0
