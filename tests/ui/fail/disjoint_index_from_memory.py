# expect: BT0499 10:11
from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, DisjointTensor, Slice, Tensor, f32, f64, i32, i64, u32


@simt.kernel(block=256)
def k(idx: Slice[i64], c: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(idx):
        c[idx[i]] = 1.0
