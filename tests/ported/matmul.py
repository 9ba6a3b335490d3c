"""numba-cuda's documentation examples: the naive ``matmul`` and the shared-memory ``fast_matmul``."""

from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32, i32

TPB = 16


@simt.kernel(block=(16, 16), requires=["a.shape[1] == b.shape[0]", "c.shape[0] == a.shape[0]",
                                       "c.shape[1] == b.shape[1]"])
def matmul(a: Tensor[f32, 2], b: Tensor[f32, 2], c: DisjointTensor[f32, 2]):
    """c = a @ b, one element per thread; numba's ``i, j = cuda.grid(2)`` (i along x)."""
    i, j = simt.grid(2)
    if i < c.shape[0] and j < c.shape[1]:
        tmp = 0.0
        for k in range(a.shape[1]):
            tmp += a[i, k] * b[k, j]
        c[i, j] = tmp


@simt.kernel(block=(TPB, TPB), requires=["a.shape[1] == b.shape[0]", "c.shape[0] == a.shape[0]",
                                         "c.shape[1] == b.shape[1]"])
def fast_matmul(a: Tensor[f32, 2], b: Tensor[f32, 2], c: DisjointTensor[f32, 2]):
    """c = a @ b through TPB x TPB tiles of both operands in shared memory."""
    x, y = simt.grid(2)
    tx = simt.thread_idx.x
    ty = simt.thread_idx.y
    tiles = (a.shape[1] + TPB - 1) // TPB
    tmp = f32(0.0)
    with simt.unsafe():
        sa = simt.shared_array(f32, (TPB, TPB))
        sb = simt.shared_array(f32, (TPB, TPB))
        for i in range(tiles):
            sa[ty, tx] = 0
            sb[ty, tx] = 0
            if y < a.shape[0] and tx + i * TPB < a.shape[1]:
                sa[ty, tx] = a[y, tx + i * TPB]
            if x < b.shape[1] and ty + i * TPB < b.shape[0]:
                sb[ty, tx] = b[ty + i * TPB, x]
            simt.sync_threads()
            for j in range(TPB):
                tmp += sa[ty, j] * sb[j, tx]
            simt.sync_threads()
    if y < c.shape[0] and x < c.shape[1]:
        c[y, x] = tmp


@simt.kernel(block=(16, 16), requires=["a.shape[1] == b.shape[0]", "c.shape[0] == a.shape[0]",
                                       "c.shape[1] == b.shape[1]"])
def matmul_kernel2(a: Tensor[f32, 2], b: Tensor[f32, 2], c: DisjointTensor[f32, 2]):
    """numba's matmul with the index spelled out from thread geometry bound to names."""
    tx = simt.thread_idx.x
    ty = simt.thread_idx.y
    bx = simt.block_idx.x
    by = simt.block_idx.y
    bw = simt.block_dim.x
    bh = simt.block_dim.y
    i = tx + bx * bw
    j = ty + by * bh
    if i < c.shape[0] and j < c.shape[1]:
        tmp = 0.0
        for k in range(a.shape[1]):
            tmp += a[i, k] * b[k, j]
        c[i, j] = tmp


@simt.kernel(block=(16, 16), requires=["len(a) == m * k", "len(b) == k * n", "len(c) == m * n"])
def sgemm_naive(m: i32, n: i32, k: i32, alpha: f32, a: Slice[f32], b: Slice[f32], beta: f32,
                c: DisjointSlice[f32]):
    """The naive SGEMM of CUDA C++ tutorials: C = alpha * A @ B + beta * C on flat row-major arrays,
    ``x = blockIdx.x * blockDim.x + threadIdx.x`` indexing rows."""
    x = simt.block_idx.x * simt.block_dim.x + simt.thread_idx.x
    y = simt.block_idx.y * simt.block_dim.y + simt.thread_idx.y
    if x < m and y < n:
        tmp = f32(0.0)
        for i in range(k):
            tmp += a[x * k + i] * b[i * n + y]
        c[x * n + y] = alpha * tmp + beta * c[x * n + y]
