"""SIMT kernels: one thread's work each, launched over a grid of blocks."""

from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32, f64, i32, i64

#: threads per block for the 1-D kernels
BLOCK = 256


@simt.kernel(block=BLOCK, requires=["len(a) == len(c)", "len(b) == len(c)"])
def vecadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(c):
        c[i] = a[i] + b[i]


@simt.kernel(block=BLOCK, requires=["len(x) == len(out)", "len(y) == len(out)"])
def saxpy(alpha: f32, x: Slice[f32], y: Slice[f32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = alpha * x[i] + y[i]


@simt.kernel(
    block=(16, 16),
    requires=[
        "a.shape[0] == c.shape[0]", "a.shape[1] == c.shape[1]",
        "b.shape[0] == c.shape[0]", "b.shape[1] == c.shape[1]",
    ],
)
def matadd(a: Tensor[f32, 2], b: Tensor[f32, 2], c: DisjointTensor[f32, 2]):
    row, col = simt.index_2d()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = a[row, col] + b[row, col]


@simt.kernel(block=128, requires=["len(x) == len(y)", "len(coeffs) >= 1"])
def polyval_abs(coeffs: Slice[f64], x: Slice[f64], y: DisjointSlice[f64]):
    """|p(x)| by Horner's rule, coefficients highest power first."""
    i = simt.index_1d()
    if i < len(y):
        acc = 0.0
        for k in range(len(coeffs)):
            acc = acc * x[i] + coeffs[k]
        if acc < 0.0:
            y[i] = -acc
        else:
            y[i] = acc


@simt.kernel(block=BLOCK, requires=["len(x) == len(out)"])
def collatz_steps(x: Slice[i64], limit: i32, out: DisjointSlice[i32]):
    """Steps for each x to reach 1 under the Collatz map, capped at ``limit``."""
    i = simt.index_1d()
    if i < len(out):
        n = x[i]
        steps = i32(0)
        while n != 1 and steps < limit:
            if n % 2 == 0:
                n = n // 2
            else:
                n = 3 * n + 1
            steps += 1
        out[i] = steps
