import math

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i32

SQRT_2_OVER_PI = 0.7978845608028654
INV_SQRT_2 = 0.7071067811865476


@simt.device
def gelu_tanh(x: f32) -> f32:
    inner = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + math.tanh(inner))


@simt.device
def gelu_erf(x: f32) -> f32:
    return 0.5 * x * (1.0 + math.erf(x * INV_SQRT_2))


@simt.kernel(block=256, requires=["len(x) == len(out)"])
def activations(x: Slice[f32], out: DisjointSlice[f32], mode: i32, lo: f32, hi: f32):
    i = simt.index_1d()
    if i < len(out):
        v = x[i]
        if mode == 0:
            out[i] = max(v, 0.0)
        elif mode == 1:
            out[i] = math.min(math.max(v, lo), hi)
        elif mode == 2:
            out[i] = gelu_tanh(v)
        elif mode == 3:
            out[i] = gelu_erf(v)
        else:
            out[i] = v / (1.0 + math.exp(-v))
