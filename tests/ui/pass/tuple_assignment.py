from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i64


@simt.kernel(block=256)
def fib(out: DisjointSlice[i64], steps: i64):
    i = simt.index_1d()
    a, b = 0, 1
    for _ in range(steps + i):
        a, b = b, a + b
    w, h = simt.gridsize(2)
    if i < len(out):
        out[i] = a + 0 * (w + h)


@simt.kernel(block=256)
def ordered(x: Slice[f32], lo: DisjointSlice[f32], hi: DisjointSlice[f32]):
    i = simt.index_1d()
    if i + 1 < len(x) and i < len(lo) and i < len(hi):
        p, q = x[i], x[i + 1]
        if p > q:
            p, q = q, p
        lo[i] = p
        hi[i] = q
