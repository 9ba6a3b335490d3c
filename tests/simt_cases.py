"""SIMT kernels written as ported numba-cuda code is: grid-stride loops, row-major
linearisation, the spelled-out thread index, numba's spellings, implicit widening,
tuple assignment and device functions taking arrays and returning tuples.

Built on the CPU by tests/test_simt_cases.py and run against NumPy on a GPU by
tests/gpu/test_simt_patterns.py.
"""

from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, DisjointTensor, Slice, Tensor, f32, f64, i32, i64, u32


@simt.kernel(block=128)
def saxpy_while(a: f32, x: Slice[f32], y: Slice[f32], out: DisjointSlice[f32]):
    """out = a*x + y, each thread striding over the grid."""
    i = simt.index_1d()
    while i < len(out):
        if i < len(x) and i < len(y):
            out[i] = a * x[i] + y[i]
        i += simt.grid_dim.x * simt.block_dim.x


@simt.kernel(block=128)
def saxpy_range(a: f32, x: Slice[f32], y: Slice[f32], out: DisjointSlice[f32]):
    """The same, numba's way: range(cuda.grid(1), n, cuda.gridsize(1))."""
    for i in range(simt.grid(1), len(out), simt.gridsize(1)):
        if i < len(x) and i < len(y):
            out[i] = a * x[i] + y[i]


@simt.kernel(block=128)
def copy_explicit(x: Slice[f32], out: DisjointSlice[f32]):
    """The index written out, as CUDA C++ does."""
    tid = simt.thread_idx.x
    i = simt.block_dim.x * simt.block_idx.x + tid
    if i < len(out) and i < len(x):
        out[i] = x[i] + 1.0


@simt.kernel(block=(16, 16))
def matadd_flat(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32], rows: i32, cols: i32):
    """c = a + b over row-major matrices held as flat arrays."""
    row, col = simt.index_2d()
    if row < rows and col < cols:
        k = row * cols + col
        c[row * cols + col] = a[k] + b[k]


@simt.kernel(block=(16, 16))
def scale_grid2(a: Tensor[f32, 2], out: DisjointSlice[f32], s: f64):
    """out (flat) = a * s, indexed with numba's (x, y) = cuda.grid(2); the scale is widened from f32."""
    x, y = simt.grid(2)
    width = a.shape[1]
    if x >= width or y >= a.shape[0]:
        return
    out[y * width + x] = f32(a[y, x] * s)


@simt.kernel(block=(8, 8, 4))
def volume_index(out: DisjointSlice[i64], nx: i64, ny: i64, nz: i64):
    """out[(z*ny + y)*nx + x] = that same linear index."""
    z, y, x = simt.index_3d()
    if x < nx and y < ny and z < nz:
        out[(z * ny + y) * nx + x] = x + nx * (y + ny * z)


@simt.kernel(block=256)
def histogram_widened(values: Slice[i32], bins: AtomicSlice[u32]):
    """`v < len(bins)` with v: i32 compares as i64."""
    i = simt.index_1d()
    if i < values.size:
        v = values[i]
        if v >= 0 and v < len(bins):
            bins.atomic_add(v, 1)


@simt.kernel(block=256)
def int_to_float(x: Slice[i32], out: DisjointSlice[f64]):
    """An integer stored into a float element converts; i32 * f32 is an f32, widened to f64."""
    i = simt.index_1d()
    if i < len(out) and i < len(x):
        out[i] = x[i] * 0.5


@simt.device
def ordered_pair(a: Slice[f32], i: i64) -> tuple[f32, f32]:
    """(min, max) of a[i] and a[i + 1]; the last element pairs with itself."""
    if i + 1 >= len(a):
        return a[i], a[i]
    p, q = a[i], a[i + 1]
    if p > q:
        p, q = q, p
    return p, q


@simt.device
def sign(v: f32) -> i32:
    if v > 0.0:
        return 1
    elif v < 0.0:
        return -1
    else:
        return 0


@simt.device
def row_total(m: Tensor[f32, 2], row: i64) -> f32:
    s = 0.0
    for c in range(m.shape[1]):
        s += m[row, c]
    return s


@simt.kernel(block=128)
def pairs_and_signs(a: Slice[f32], lo: DisjointSlice[f32], hi: DisjointSlice[f32], s: DisjointSlice[i32]):
    i = simt.index_1d()
    if i < len(a) and i < len(lo) and i < len(hi) and i < len(s):
        p, q = ordered_pair(a, i)
        lo[i] = p
        hi[i] = q
        s[i] = sign(a[i])


@simt.kernel(block=128)
def row_sums(m: Tensor[f32, 2], out: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < m.shape[0] and i < len(out):
        out[i] = row_total(m, i)


@simt.kernel(block=128)
def fibonacci(out: DisjointSlice[i64]):
    """out[i] = fib(i), by `a, b = b, a + b`."""
    i = simt.index_1d()
    a, b = 0, 1
    for _ in range(i):
        a, b = b, a + b
    if i < len(out):
        out[i] = a
