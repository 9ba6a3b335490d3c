from buildtile import simt
from buildtile.types import DisjointSlice, Slice, bf16, bool_, f16, f32, f64, i32, i64, u32, u64

SCALE = 1.5
SHIFT = 3
MASK = (1 << SHIFT) - 1
ENABLED = True
OFFSET = -SCALE * 2


@simt.kernel(block=256, requires=["len(x) == len(out)"])
def mixed_casts(x: Slice[f64], out: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(out):
        v = x[i]
        a = i32(v)
        b = u32(a & MASK)
        c = u64(b) << u64(SHIFT)
        d = i64(c) - i
        e = f16(f32(d))
        g = bf16(f32(e) * SCALE)
        h = f64(g) + OFFSET
        out[i] = f32(h) if ENABLED else 0.0


@simt.kernel(block=256)
def flags(x: Slice[f32], out: DisjointSlice[bool_]):
    i = simt.index_1d()
    if i < len(out):
        positive = x[i] > 0.0 if i < len(x) else False
        out[i] = positive != ENABLED
