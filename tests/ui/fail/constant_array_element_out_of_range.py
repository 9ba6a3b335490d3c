# expect: BT0308 11:12
from buildtile import simt
from buildtile.types import DisjointSlice, i8

LEVELS = (0, 64, 128, 192)


@simt.kernel(block=64)
def k(c: DisjointSlice[i8]):
    i = simt.index_1d()
    c[i] = LEVELS[i % 4]
