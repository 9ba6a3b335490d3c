import math

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, bf16, f16, f32


@simt.kernel(block=256, requires=["len(x) == len(y)", "len(x) == len(out)"])
def axpy_half(alpha: f16, x: Slice[f16], y: Slice[f16], out: DisjointSlice[f16]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = alpha * x[i] + y[i]


@simt.kernel(block=256, requires=["len(x) == len(out)"])
def bf16_to_f32_scaled(x: Slice[bf16], out: DisjointSlice[f32], scale: bf16):
    i = simt.index_1d()
    if i < len(out):
        v = x[i] * scale
        out[i] = f32(v) + math.sqrt(f32(2.0))


@simt.kernel(block=256, requires=["len(x) == len(out)"])
def f32_to_bf16(x: Slice[f32], out: DisjointSlice[bf16]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = bf16(x[i] * 0.5)
