# expect: BT0600 6:35
from buildtile import simt
from buildtile.types import DisjointSlice, f32, i64


@simt.kernel(block=256, requires=["len(n) == len(c)"])
def k(n: i64, c: DisjointSlice[f32]):
    i = simt.index_1d()
    c[i] = 1.0
