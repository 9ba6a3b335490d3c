from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32, i32, i64


@simt.kernel(block=(16, 16))
def add_2d(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32], m: i32, n: i32):
    row, col = simt.index_2d()
    if row < m and col < n:
        c[row * n + col] = a[row * n + col] + b[col + n * row]


@simt.kernel(block=(16, 16))
def add_grid_order(a: Slice[f32], c: DisjointSlice[f32], width: i64, height: i64):
    x, y = simt.grid(2)
    if x >= width or y >= height:
        return
    c[y * width + x] = a[y * width + x] * 2.0


@simt.kernel(block=(8, 8, 4))
def fill_3d(c: DisjointSlice[f32], nx: i64, ny: i64, nz: i64):
    z, y, x = simt.index_3d()
    if x < nx and y < ny and z < nz:
        c[(z * ny + y) * nx + x] = f32(x + y + z)


@simt.kernel(block=256)
def explicit_index(a: Tensor[f32, 2], c: DisjointSlice[f32]):
    i = simt.block_idx.x * simt.block_dim.x + simt.thread_idx.x
    if i < c.size and i < a.size:
        c[i] = f32(a.size)
