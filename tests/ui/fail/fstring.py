# expect: BT0200 9:11
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    msg = f"thread {i}"
    c[i] = 1.0
