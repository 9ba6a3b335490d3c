# expect: BT0308 10:17 BT0308 11:20
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, i8, u8


@simt.kernel(block=64)
def k(x: Slice[u8], c: DisjointSlice[i8]):
    i = simt.index_1d()
    v = x[i]
    w: u8 = v + 256
    c[i] = i8(v) + 200
