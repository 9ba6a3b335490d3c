# expect: BT0499 9:11
from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, DisjointTensor, Slice, Tensor, f32, f64, i32, i64, u32


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    for j in range(len(c)):
        c[j] = 1.0
