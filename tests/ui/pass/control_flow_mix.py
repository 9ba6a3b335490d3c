from buildtile import simt
from buildtile.types import DisjointSlice, Slice, bool_, f32, i32, i64

MAX_ITERS = 64
ESCAPE = 4.0


@simt.kernel(block=256, requires=["len(cr) == len(out)", "len(ci) == len(out)"])
def mandelbrot(cr: Slice[f32], ci: Slice[f32], out: DisjointSlice[i32]):
    i = simt.index_1d()
    if i >= len(out):
        return
    zr = 0.0
    zi = 0.0
    n = 0
    while True:
        if n >= MAX_ITERS:
            break
        zr2 = zr * zr
        zi2 = zi * zi
        if zr2 + zi2 > ESCAPE:
            break
        zi = 2.0 * zr * zi + ci[i]
        zr = zr2 - zi2 + cr[i]
        n += 1
    out[i] = n


@simt.kernel(block=128)
def classify(x: Slice[i64], strict: bool_, out: DisjointSlice[i32]):
    i = simt.index_1d()
    if i < len(out) and i < len(x):
        v = x[i]
        if v < 0:
            out[i] = -1
        elif v == 0:
            out[i] = 0
        else:
            if strict and v % 2 == 1:
                out[i] = 3
            elif not strict or v > 100:
                out[i] = 2
            else:
                out[i] = 1


@simt.kernel(block=64)
def skip_multiples(k: i64, out: DisjointSlice[i64]):
    i = simt.index_1d()
    if i >= len(out):
        return
    total = 0
    for j in range(i + 1):
        if k != 0 and j % k == 0:
            continue
        total += j if j % 2 == 0 else -j
    out[i] = total
