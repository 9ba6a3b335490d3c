# expect: BT0425 9:9 BT0425 10:9 BT0425 11:9 BT0425 12:5
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=128)
def k(x: Slice[f32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    n = int(x[i])
    y = float(n)
    z = complex(y, 1.0)
    print(n)
    out[i] = y
