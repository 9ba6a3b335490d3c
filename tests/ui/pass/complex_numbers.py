import math

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, complex64, complex128, f32, f64, i32


@simt.device
def rotate(z: complex64, turns: f32) -> complex64:
    angle = turns * 2.0 * math.pi
    return z * complex64(math.cos(angle), math.sin(angle))


@simt.kernel(block=128, requires=["len(a) == len(out)", "len(b) == len(out)"])
def arithmetic(a: Slice[complex64], b: Slice[complex64], out: DisjointSlice[complex64], size: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(out):
        z = a[i] * b[i] + a[i] / (b[i] + 1.0) - 2.0 * a[i].conjugate()
        out[i] = -rotate(z, 0.25)
    if i < len(size) and i < len(a):
        same = 1.0 if a[i] == a[i] and a[i] != a[i] + 1.0 else 0.0
        size[i] = abs(a[i]) + a[i].real - a[i].imag + same


@simt.kernel(block=128, requires=["len(z) == len(out)"])
def functions(z: Slice[complex128], out: DisjointSlice[complex128], parts: DisjointSlice[f64]):
    i = simt.index_1d()
    if i < len(out):
        w = math.exp(z[i]) + math.sqrt(z[i]) + math.log(z[i] + 3.0)
        out[i] = w
    if i < len(parts) and i < len(z):
        x = complex128(z[i].real, 0.5) * i32(2)
        parts[i] = x.imag + f64(len(z))
