# expect: BT0308 7:10
from buildtile import simt
from buildtile.types import DisjointSlice, Tensor, f32


@simt.kernel(block=256)
def k(t: Tensor[f32, 4], c: DisjointSlice[f32]):
    i = simt.index_1d()
    c[i] = 1.0
