# expect: BT0308 7:1
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.device
def half(x: f32) -> f32:
    y = x * 0.5


@simt.kernel(block=64)
def k(out: DisjointSlice[f32]):
    i = simt.index_1d()
    out[i] = half(1.0)
