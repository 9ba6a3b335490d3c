# expect: BT0499 8:5
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i64


@simt.device
def put(c: DisjointSlice[f32], i: i64):
    c[i] = 1.0


@simt.kernel(block=256)
def k(c: DisjointSlice[f32]):
    i = simt.index_1d()
    put(c, i)
