# expect: BT0308 10:14 BT0308 11:25
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=64)
def k(c: DisjointSlice[f32]):
    with simt.unsafe():
        tile = simt.shared_array(f32, (8, 8))
        tile[0] = 1.0
        tile.atomic_add(3, 1.0)
