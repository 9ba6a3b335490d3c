# expect: BT0600 6:2
from buildtile import simt
from buildtile.types import DisjointTensor, f32


@simt.kernel(block=(8, 8, 4))
def k(m: DisjointTensor[f32, 2]):
    row, col = simt.index_2d()
    m[row, col] = 1.0
