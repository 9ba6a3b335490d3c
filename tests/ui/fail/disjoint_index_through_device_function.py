# expect: BT0499 14:7
from buildtile import simt
from buildtile.types import DisjointSlice, f32, i64


@simt.device
def same(n: i64) -> i64:
    return n


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    c[same(i)] = 1.0
