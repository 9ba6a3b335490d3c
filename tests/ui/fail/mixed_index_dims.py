# expect: BT0499 7:1
from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, DisjointTensor, Slice, Tensor, f32, f64, i32, i64, u32


@simt.kernel(block=256)
def k(c: DisjointSlice[f32], m: DisjointTensor[f32, 2]):
    i = simt.index_1d()
    row, col = simt.index_2d()
    c[i] = 1.0
