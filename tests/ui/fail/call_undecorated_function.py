# expect: BT0425 13:14
from buildtile import simt
from buildtile.types import DisjointSlice, f32


def helper(x: f32) -> f32:
    return x * 2.0


@simt.kernel(block=64)
def k(out: DisjointSlice[f32]):
    i = simt.index_1d()
    out[i] = helper(1.0)
