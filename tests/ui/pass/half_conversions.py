import math

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, bf16, f16, f32, i32


@simt.kernel(block=256, requires=["len(x) == len(out)"])
def f16_to_bf16(x: Slice[f16], out: DisjointSlice[bf16]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = bf16(f32(x[i]))


@simt.kernel(block=256, requires=["len(x) == len(out)"])
def quantize_f16(x: Slice[f32], scale: f32, out: DisjointSlice[i32]):
    i = simt.index_1d()
    if i < len(out):
        h = f16(x[i] * scale)
        out[i] = i32(math.round(f32(h)))


@simt.kernel(block=128, requires=["len(a) == len(b)", "len(a) == len(out)"])
def half_max_abs(a: Slice[f16], b: Slice[bf16], out: DisjointSlice[f16]):
    i = simt.index_1d()
    if i < len(out):
        u = abs(a[i])
        w = f16(f32(b[i]))
        out[i] = u if u > w else w
