# expect: BT0499 10:11
from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32, i32, i64


@simt.kernel(block=(16, 16))
def k(c: DisjointSlice[f32], n: i64):
    row, col = simt.index_2d()
    if col < n:
        c[row * n + row] = 1.0
