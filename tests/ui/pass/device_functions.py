import math

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, f64, i64


@simt.device
def softplus(x: f32) -> f32:
    if x > 20.0:
        return x
    return math.log(1.0 + math.exp(x))


@simt.device
def clamp(x: f32, lo: f32, hi: f32) -> f32:
    return math.min(math.max(x, lo), hi)


@simt.device
def smooth_clamp(x: f32) -> f32:
    # device functions call each other
    return clamp(softplus(x), 0.0, 8.0)


@simt.device
def triangle(n: i64) -> i64:
    total = 0
    for k in range(n + 1):
        total += k
    return total


@simt.kernel(block=256, requires=["len(x) == len(y)"])
def activate(x: Slice[f32], y: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(y):
        y[i] = smooth_clamp(x[i])


@simt.kernel(block=128)
def triangles(out: DisjointSlice[i64]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = triangle(i)


@simt.kernel(block=128, requires=["len(x) == len(out)"])
def every_math_function(x: Slice[f64], out: DisjointSlice[f64]):
    i = simt.index_1d()
    if i < len(out):
        v = x[i]
        a = math.sqrt(v) + math.exp(v) + math.exp2(v) + math.expm1(v) + math.log(v) + math.log2(v)
        b = math.log10(v) + math.log1p(v) + math.pow(v, 1.5) + math.sin(v) + math.cos(v) + math.tan(v)
        c = math.asin(v) + math.acos(v) + math.atan(v) + math.atan2(v, 2.0) + math.sinh(v) + math.cosh(v)
        d = math.tanh(v) + math.erf(v) + math.erfc(v) + math.cbrt(v) + math.hypot(v, 3.0) + math.copysign(v, -1.0)
        e = math.floor(v) + math.ceil(v) + math.trunc(v) + math.round(v) + math.rsqrt(v) + math.fma(v, v, v)
        out[i] = a + b + c + d + e + math.min(v, 1.0) + math.max(v, 0.0) + math.fabs(v)
