# expect: BT0308 14:5
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i64


@simt.device
def two(x: f32) -> tuple[f32, f32]:
    return x, x


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    a, b, d = two(1.0)
    c[i] = a
