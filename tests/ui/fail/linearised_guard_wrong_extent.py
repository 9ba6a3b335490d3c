# expect: BT0499 10:11
from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32, i32, i64


@simt.kernel(block=(16, 16))
def k(c: DisjointSlice[f32], m: i64, n: i64):
    row, col = simt.index_2d()
    if row < n and col < m:
        c[row * n + col] = 1.0
