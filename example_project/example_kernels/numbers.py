"""Kernels over complex numbers: arrays of NumPy's complex64/complex128 (interleaved real and
imaginary parts), read, computed with and written as values of their own type."""

import math

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, complex64, f32


@simt.kernel(block=256, requires=["len(z) == len(out)", "len(theta) == len(out)"])
def rotate_phase(z: Slice[complex64], theta: Slice[f32], out: DisjointSlice[complex64],
                 magnitude: DisjointSlice[f32]):
    """out[i] = z[i] * e^(i theta[i]); magnitude[i] = |z[i]| (where it has room)."""
    i = simt.index_1d()
    if i < len(out):
        out[i] = z[i] * math.exp(complex64(0.0, theta[i]))
    if i < len(magnitude) and i < len(z):
        magnitude[i] = abs(z[i])
