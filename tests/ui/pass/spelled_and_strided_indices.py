from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32, i32

BLOCK = 128


@simt.kernel(block=(8, 4, 4))
def volume(a: Tensor[f32, 3], out: DisjointTensor[f32, 3]):
    """CUDA C++'s spelled-out index along x, y and z: the components of index_3d()."""
    x = simt.block_idx.x * simt.block_dim.x + simt.thread_idx.x
    y = simt.thread_idx.y + simt.block_dim.y * simt.block_idx.y
    z = simt.block_idx.z * simt.block_dim.z + simt.thread_idx.z
    if z < out.shape[0] and y < out.shape[1] and x < out.shape[2]:
        out[z, y, x] = a[z, y, x] * 2.0


@simt.kernel(block=(16, 16))
def rows_flat(c: DisjointSlice[f32], w: i32, h: i32):
    """The spelled-out 2-D index through names bound once, linearised under its guard."""
    bx = simt.block_idx.x
    bw = simt.block_dim.x
    col = bx * bw + simt.thread_idx.x
    row = simt.block_idx.y * simt.block_dim.y + simt.thread_idx.y
    if row < h and col < w:
        c[row * w + col] = f32(row - col)


@simt.kernel(block=(8, 8, 2))
def strided_volume(out: DisjointTensor[f32, 3]):
    """3-D grid-stride loops, each component stepped along its own axis."""
    x0, y0, z0 = simt.grid(3)
    gx, gy, gz = simt.gridsize(3)
    for z in range(z0, out.shape[0], gz):
        for y in range(y0, out.shape[1], gy):
            for x in range(x0, out.shape[2], gx):
                out[z, y, x] = 1.0


@simt.kernel(block=BLOCK, requires=["len(out) == len(x)", "len(x) >= BLOCK * 2 - BLOCK"])
def stepped_copies(x: Slice[f32], out: DisjointSlice[f32]):
    """Copies of the index only ever stepped by the grid's total threads, in either spelling."""
    tid = simt.index_1d()
    stride = simt.grid_dim.x * simt.block_dim.x
    k = tid
    while k < len(out):
        out[k] = x[k] * 2.0
        k += stride
    j = tid
    while j < len(out):
        out[j] += 1.0
        j = j + simt.gridsize(1)


@simt.kernel(block=128)
def explicit_1d_with_spelled_y(out: DisjointSlice[f32]):
    """A kernel that calls index_1d() keeps a spelled-out `.y` index a plain integer: still 1-D."""
    i = simt.index_1d()
    band = simt.block_idx.y * simt.block_dim.y + simt.thread_idx.y
    if i < len(out):
        out[i] = f32(band + i)
