# expect: BT0600 11:5
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256)
def k(out: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = 1.0
    simt.grid_sync()
