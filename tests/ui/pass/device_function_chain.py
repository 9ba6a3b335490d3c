import math

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i64


@simt.device
def lerp(a: f32, b: f32, t: f32) -> f32:
    return math.fma(t, b - a, a)


@simt.device
def saturate(x: f32) -> f32:
    return math.min(math.max(x, 0.0), 1.0)


@simt.device
def smoothstep(lo: f32, hi: f32, x: f32) -> f32:
    t = saturate((x - lo) / (hi - lo))
    return t * t * (3.0 - 2.0 * t)


@simt.device
def blend(a: f32, b: f32, x: f32) -> f32:
    return lerp(a, b, smoothstep(0.0, 1.0, x))


@simt.device
def gcd(a: i64, b: i64) -> i64:
    while b != 0:
        r = a % b
        a = b
        b = r
    return a


@simt.kernel(block=256, requires=["len(x) == len(out)"])
def blend_kernel(x: Slice[f32], lo: f32, hi: f32, out: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = blend(lo, hi, x[i])


@simt.kernel(block=64)
def gcd_with_index(n: i64, out: DisjointSlice[i64]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = gcd(i + 1, n)
