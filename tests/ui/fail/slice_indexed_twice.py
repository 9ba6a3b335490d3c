# expect: BT0308 9:14
from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, DisjointTensor, Slice, Tensor, f32, f64, i32, i64, u32


@simt.kernel(block=256)
def k(a: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    c[i] = a[i, i]
