# expect: BT0308 10:16
from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, DisjointTensor, Slice, Tensor, f32, f64, i32, i64, u32


@simt.kernel(block=256)
def k(n: i32, c: DisjointSlice[i32]):
    i = simt.index_1d()
    if i < len(c):
        c[i] = i + n
