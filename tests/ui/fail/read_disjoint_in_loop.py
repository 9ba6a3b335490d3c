# expect: BT0499 11:16
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    s = 0.0
    for j in range(len(c)):
        s += c[j]
    c[i] = s
