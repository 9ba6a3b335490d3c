# expect: BT0308 10:18
from buildtile import simt
from buildtile.types import DisjointSlice, i32


@simt.kernel(block=64)
def k(out: DisjointSlice[i32]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = 3000000000
