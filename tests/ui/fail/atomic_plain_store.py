# expect: BT0594 9:5
from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, DisjointTensor, Slice, Tensor, f32, f64, i32, i64, u32


@simt.kernel(block=256)
def k(hist: AtomicSlice[i32]):
    i = simt.index_1d()
    hist[i] = 1
