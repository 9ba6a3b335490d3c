# expect: BT0308 9:9
from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32, i32, i64


@simt.kernel(block=256)
def k(c: DisjointSlice[f32], n: i64):
    i = simt.index_1d()
    g = simt.grid(n)
    c[i] = 1.0
