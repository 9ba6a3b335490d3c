# expect: BT0200 10:5
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    n = 0
    while n < 4:
        n += 1
    else:
        n = 0
    c[i] = 1.0
