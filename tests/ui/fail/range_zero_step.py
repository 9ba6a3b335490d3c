# expect: BT0600 10:26
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    s = 0.0
    for j in range(0, 8, 0):
        s += 1.0
    c[i] = s
