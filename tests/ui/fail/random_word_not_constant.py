# expect: BT0308 10:38 BT0308 11:27
from buildtile import random, simt
from buildtile.types import DisjointSlice, f32, u32


@simt.kernel(block=64)
def k(bits: DisjointSlice[u32], u: DisjointSlice[f32]):
    i = simt.index_1d()
    w = i % 4
    bits[i] = random.philox(7, i, 0, w)
    u[i] = random.uniform(1.5, i)
