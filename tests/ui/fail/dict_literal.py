# expect: BT0200 9:13
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    table = {0: 1.0}
    c[i] = 1.0
