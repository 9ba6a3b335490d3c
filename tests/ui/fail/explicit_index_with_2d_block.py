# expect: BT0600 6:2
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=(16, 16))
def k(c: DisjointSlice[f32]):
    i = simt.thread_idx.x + simt.block_idx.x * simt.block_dim.x
    if i < len(c):
        c[i] = 1.0
