# expect: BT0594 8:5
from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, DisjointTensor, Slice, Tensor, f32, f64, i32, i64, u32


@simt.kernel(block=256)
def k(n: i64, c: DisjointSlice[f32]):
    n = 3
    i = simt.index_1d()
    c[i] = 1.0
