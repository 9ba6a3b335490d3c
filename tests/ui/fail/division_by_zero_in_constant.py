# expect: BT0080 11:12
from buildtile import simt
from buildtile.types import DisjointSlice, i32

CHUNKS = 0


@simt.kernel(block=256)
def k(c: DisjointSlice[i32]):
    i = simt.index_1d()
    c[i] = 1024 // CHUNKS
