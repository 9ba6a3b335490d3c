# expect: BT0499 9:5
from buildtile import simt
from buildtile.types import DisjointTensor, f32


@simt.kernel(block=256)
def k(m: DisjointTensor[f32, 2]):
    i = simt.index_1d()
    m[i, i] = 1.0
