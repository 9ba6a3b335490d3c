# expect: BT0308 7:12
from buildtile import simt
from buildtile.types import DisjointSlice, SharedArray, f32


@simt.kernel(block=64)
def k(buf: SharedArray[f32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = 1.0
