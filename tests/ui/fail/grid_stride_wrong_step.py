# expect: BT0384 11:9
from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32, i32, i64


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    while i < len(c):
        c[i] = 1.0
        i += 2
