# expect: BT0499 8:7
from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, DisjointTensor, Slice, Tensor, f32, f64, i32, i64, u32


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    c[0] = 1.0
