# expect: BT0499 9:5
from buildtile import simt
from buildtile.types import DisjointTensor, f32


@simt.kernel(block=(4, 8, 8))
def k(m: DisjointTensor[f32, 2]):
    z, y, x = simt.index_3d()
    m[y, x] = 1.0
