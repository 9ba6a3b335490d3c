# expect: BT0200 8:5
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    def twice(v: f32) -> f32:
        return v * 2.0

    i = simt.index_1d()
    c[i] = 1.0
