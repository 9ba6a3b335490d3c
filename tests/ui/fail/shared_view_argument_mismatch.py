# expect: BT0308 22:19 BT0308 23:20
from buildtile import simt
from buildtile.types import DisjointSlice, SharedArray, Slice, f32, i64


@simt.device
def first(buf: SharedArray[f32]) -> f32:
    with simt.unsafe():
        return buf[0]


@simt.device
def corner(tile: SharedArray[f32, 2]) -> f32:
    with simt.unsafe():
        return tile[0, 0]


@simt.kernel(block=64)
def k(x: Slice[f32], out: DisjointSlice[f32]):
    with simt.unsafe():
        buf = simt.shared_array(f32, 64)
        a = first(x)
        b = corner(buf)
    i = simt.index_1d()
    if i < len(out):
        out[i] = a + b
