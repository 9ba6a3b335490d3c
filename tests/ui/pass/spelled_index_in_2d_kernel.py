from buildtile import simt
from buildtile.types import DisjointTensor, f32


@simt.kernel(block=(16, 16))
def k(c: DisjointTensor[f32, 2]):
    row, col = simt.index_2d()
    flat = simt.thread_idx.x + simt.block_idx.x * simt.block_dim.x
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = f32(flat)
