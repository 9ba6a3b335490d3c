# expect: BT0308 10:43
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=64)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    with simt.unsafe():
        buf = simt.shared_array(f32, (16, len(c)))
        buf[0, 0] = 1.0
