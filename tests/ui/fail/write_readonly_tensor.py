# expect: BT0594 9:5
from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, DisjointTensor, Slice, Tensor, f32, f64, i32, i64, u32


@simt.kernel(block=(16, 16))
def k(a: Tensor[f32, 2], c: DisjointTensor[f32, 2]):
    row, col = simt.index_2d()
    a[row, col] = c[row, col]
