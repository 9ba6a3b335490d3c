# expect: BT0600 6:35
from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, DisjointTensor, Slice, Tensor, f32, f64, i32, i64, u32


@simt.kernel(block=256, requires=["len(q) == len(c)"])
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    c[i] = 1.0
