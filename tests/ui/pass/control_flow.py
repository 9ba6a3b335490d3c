import math

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i32, i64

LIMIT = 1 << 10
HALF = 0.5


@simt.kernel(block=256, requires=["len(x) == len(out)"])
def first_negative_prefix(x: Slice[f32], out: DisjointSlice[i64]):
    """Index of the first negative element in x[0..i], or -1."""
    i = simt.index_1d()
    if i >= len(out):
        return
    found = -1
    k = 0
    while k <= i:
        if x[k] >= 0.0:
            k += 1
            continue
        found = k
        break
    out[i] = found


@simt.kernel(block=256)
def piecewise(x: Slice[f32], out: DisjointSlice[f32], lo: f32, hi: f32):
    i = simt.index_1d()
    if i < len(out) and i < len(x):
        v = x[i]
        if v < lo:
            out[i] = lo
        elif v > hi:
            out[i] = hi * HALF
        else:
            out[i] = math.sqrt(math.fabs(v)) if v != 0.0 else 0.0


@simt.kernel(block=64)
def casts_and_ints(n: i32, out: DisjointSlice[i32]):
    i = simt.index_1d()
    if i < len(out):
        q = i32(i) // n
        r = i32(i) % n
        acc = 0
        for j in range(0, LIMIT, 3):
            acc = acc + j
        out[i] = q * r + i32(acc % 7) - i32(f32(n) * 0.25)


@simt.kernel(block=128, requires=["len(out) == len(x)"])
def python_division(x: Slice[f32], out: DisjointSlice[f32], n: i64):
    i = simt.index_1d()
    if i < len(out):
        ratio = i / n                   # true division of integers is a float (f64), as in Python
        wrapped = x[i] % 3.0            # float modulo takes the divisor's sign
        steps = x[i] // 0.25
        out[i] = f32(ratio) + wrapped + steps
