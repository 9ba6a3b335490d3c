# expect: BT0384 10:9
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    if i >= len(c):
        i = len(c) - 1
    c[i] = 1.0
