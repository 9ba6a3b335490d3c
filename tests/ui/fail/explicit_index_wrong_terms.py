# expect: BT0499 9:7
from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32, i32, i64


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.thread_idx.x + simt.block_idx.x * simt.grid_dim.x
    c[i] = 1.0
