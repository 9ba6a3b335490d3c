# expect: BT0308 9:14
from buildtile import simt
from buildtile.types import DisjointSlice, Tensor, f32


@simt.kernel(block=256)
def k(m: Tensor[f32, 2], c: DisjointSlice[f32]):
    i = simt.index_1d()
    c[i] = m[i]
