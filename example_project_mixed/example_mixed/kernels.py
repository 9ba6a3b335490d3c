"""SIMT kernels that the C++ extension (src/ext.cpp) launches through the package's C ABI.

They are ordinary buildtile kernels: Python can launch them too
(``example_mixed.kernels.saxpy[grid](...)``).
"""

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32

#: threads per block
BLOCK = 256


@simt.kernel(block=BLOCK, requires=["len(x) == len(out)", "len(y) == len(out)"])
def saxpy(alpha: f32, x: Slice[f32], y: Slice[f32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = alpha * x[i] + y[i]


@simt.kernel(block=BLOCK, requires=["len(x) == len(out)"])
def scale(factor: f32, x: Slice[f32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = factor * x[i]
