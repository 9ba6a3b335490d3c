# expect: BT0431 7:1 BT0431 13:5
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.record
class abi_version:
    x: f32


@simt.record
class Point:
    é: f32
    y: f32


@simt.kernel(block=128, requires=["len(p) == len(out)"])
def copy_points(p: Slice[Point], out: DisjointSlice[Point]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = p[i]
