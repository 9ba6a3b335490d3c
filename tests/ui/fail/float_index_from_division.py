# expect: BT0308 11:20
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=128)
def k(x: Slice[f32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    half = i / 2
    if i < len(out):
        out[i] = x[half] + x[i / 4]
