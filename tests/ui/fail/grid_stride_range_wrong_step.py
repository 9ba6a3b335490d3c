# expect: BT0499 9:11
from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32, i32, i64


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    for i in range(simt.index_1d(), len(c), simt.block_dim.x):
        c[i] = 1.0
