# expect: BT0308 14:12
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.device
def scale(x: f32, s: f32) -> f32:
    return x * s


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    c[i] = scale(1.0)
