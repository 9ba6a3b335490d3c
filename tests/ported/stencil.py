"""Stencils: the 1-D shared-memory stencil of NVIDIA's CUDA C/C++ introduction (each block stages
its elements and a RADIUS halo, then sums 2 * RADIUS + 1 neighbours), a 2-D Jacobi step of the
heat equation, and numba's 3-D indexing with ``cuda.grid(3)``."""

from buildtile import simt
from buildtile.types import DisjointTensor, DisjointSlice, Slice, Tensor, f32, i32

RADIUS = 3
BLOCK_SIZE = 128


@simt.kernel(block=BLOCK_SIZE, requires=["len(out) == len(inp)"])
def stencil_1d(inp: Slice[i32], out: DisjointSlice[i32]):
    with simt.unsafe():
        temp = simt.shared_array(i32, BLOCK_SIZE + 2 * RADIUS)
        gindex = simt.thread_idx.x + simt.block_idx.x * simt.block_dim.x
        lindex = simt.thread_idx.x + RADIUS
        n = len(inp)
        temp[lindex] = inp[gindex] if gindex < n else 0
        if simt.thread_idx.x < RADIUS:
            temp[lindex - RADIUS] = inp[gindex - RADIUS] if gindex >= RADIUS and gindex - RADIUS < n else 0
            temp[lindex + BLOCK_SIZE] = inp[gindex + BLOCK_SIZE] if gindex + BLOCK_SIZE < n else 0
        simt.sync_threads()
        result = 0
        for offset in range(-RADIUS, RADIUS + 1):
            result += temp[lindex + offset]
    if gindex < n:
        out[gindex] = result


@simt.kernel(block=(16, 16), requires=["u.shape[0] == u_new.shape[0]", "u.shape[1] == u_new.shape[1]"])
def jacobi_step(u: Tensor[f32, 2], u_new: DisjointTensor[f32, 2], alpha: f32):
    """One explicit step of the heat equation: interior points move toward their neighbours'
    mean, the boundary is copied."""
    i, j = simt.index_2d()
    ny = u.shape[0]
    nx = u.shape[1]
    if i < ny and j < nx:
        if i == 0 or j == 0 or i == ny - 1 or j == nx - 1:
            u_new[i, j] = u[i, j]
        else:
            lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
            u_new[i, j] = u[i, j] + alpha * lap


@simt.kernel(block=(8, 4, 4), requires=["a.shape[0] == out.shape[0]", "a.shape[1] == out.shape[1]",
                                        "a.shape[2] == out.shape[2]"])
def scale_3d(a: Tensor[f32, 3], out: DisjointTensor[f32, 3], s: f32):
    """numba's ``x, y, z = cuda.grid(3)``, indexing ``out[x, y, z]`` (x the first axis)."""
    x, y, z = simt.grid(3)
    if x < out.shape[0] and y < out.shape[1] and z < out.shape[2]:
        out[x, y, z] = a[x, y, z] * s + f32(x * 100 + y * 10 + z)
