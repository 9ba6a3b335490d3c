# expect: BT0308 10:18 BT0308 11:16 BT0308 12:13 BT0308 13:13 BT0308 14:16 BT0308 18:21
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, complex64, complex128, f32, i32, i64


@simt.kernel(block=128)
def k(z: Slice[complex128], n: i32, out: DisjointSlice[f32], w: DisjointSlice[complex64]):
    i = simt.index_1d()
    if i < len(out) and i < len(z) and i < len(w):
        out[i] = z[i]
        w[i] = z[i]
        b = z[i] < z[i]
        c = z[i] * i64(n)
        w[i] = z[i] % 2.0


@simt.kernel(block=128)
def scalar_param(z: complex64, out: DisjointSlice[complex64]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = z
