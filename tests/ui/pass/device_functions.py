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
