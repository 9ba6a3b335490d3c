# expect: BT0308 9:38
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=64)
def k(c: DisjointSlice[f32]):
    with simt.unsafe():
        buf = simt.shared_array(f32, (2, 2, 2, 2))
        buf[0, 0, 0] = 1.0
