# expect: BT0600 6:2
from buildtile import simt
from buildtile.types import DisjointTensor, f32


@simt.kernel(block=(8, 8, 4))
def k(c: DisjointTensor[f32, 2]):
    col = simt.block_idx.x * simt.block_dim.x + simt.thread_idx.x
    row = simt.block_idx.y * simt.block_dim.y + simt.thread_idx.y
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = 1.0
