# expect: BT0200 10:5
from buildtile import simt
from buildtile.types import DisjointSlice, f32

SCALE = 2.0


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    global SCALE
    i = simt.index_1d()
    c[i] = SCALE
