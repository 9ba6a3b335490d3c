from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i32, i64, u32, u64


@simt.kernel(block=256)
def widen(n: i32, bins: Slice[i32], w: u32, c: DisjointSlice[i64], d: DisjointSlice[u64], e: DisjointSlice[f32]):
    i = simt.index_1d()
    v = bins[i] if i < len(bins) else 0
    if v < len(bins) and i < len(c):
        c[i] = i + n            # i32 widens to i64
        d[i] = w                # u32 widens to u64
        e[i] = v                # an integer stored into a float element converts
