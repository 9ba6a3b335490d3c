# expect: BT0308 9:12
from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, DisjointTensor, Slice, Tensor, f32, f64, i32, i64, u32


@simt.kernel(block=256)
def k(c: DisjointSlice[i32]):
    i = simt.index_1d()
    c[i] = 1.5
