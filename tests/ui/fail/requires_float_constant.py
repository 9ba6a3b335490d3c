# expect: BT0600 8:35
from buildtile import simt
from buildtile.types import DisjointSlice, f32

SCALE = 0.5


@simt.kernel(block=128, requires=["len(out) * SCALE >= 1"])
def k(out: DisjointSlice[f32]):
    i = simt.index_1d()
    out[i] = 1.0
