# expect: BT0499 9:19
from buildtile import simt
from buildtile.types import DisjointTensor, f32


@simt.kernel(block=(16, 16))
def k(m: DisjointTensor[f32, 2]):
    row, col = simt.index_2d()
    m[row, col] = m[col, row] + 1.0
