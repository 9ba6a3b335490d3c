# expect: BT0600 6:37
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256, cooperative=1)
def k(out: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = 1.0
