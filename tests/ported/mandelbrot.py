"""numba-cuda's Mandelbrot example: a device function iterating z = z*z + c on complex numbers,
and a kernel covering the image with 2-D grid-stride loops, its start and stride spelled out as
the example writes them; and the same loops written with ``simt.grid(2)``/``simt.gridsize(2)``."""

from buildtile import simt
from buildtile.types import DisjointTensor, complex128, f64, i32, u8


@simt.device
def mandel(x: f64, y: f64, max_iters: i32) -> i32:
    """The iterations before z escapes the radius-2 disc, up to max_iters."""
    c = complex128(x, y)
    z = complex128(0.0, 0.0)
    for i in range(max_iters):
        z = z * z + c
        if (z.real * z.real + z.imag * z.imag) >= 4:
            return i
    return max_iters


@simt.kernel(block=(8, 8))
def mandel_kernel(min_x: f64, max_x: f64, min_y: f64, max_y: f64, image: DisjointTensor[u8, 2], iters: i32):
    height = image.shape[0]
    width = image.shape[1]
    pixel_size_x = (max_x - min_x) / width
    pixel_size_y = (max_y - min_y) / height
    start_x = simt.block_dim.x * simt.block_idx.x + simt.thread_idx.x
    start_y = simt.block_dim.y * simt.block_idx.y + simt.thread_idx.y
    grid_x = simt.grid_dim.x * simt.block_dim.x
    grid_y = simt.grid_dim.y * simt.block_dim.y
    for x in range(start_x, width, grid_x):
        real = min_x + x * pixel_size_x
        for y in range(start_y, height, grid_y):
            imag = min_y + y * pixel_size_y
            image[y, x] = u8(mandel(real, imag, iters))


@simt.kernel(block=(8, 8))
def mandel_grid2(min_x: f64, max_x: f64, min_y: f64, max_y: f64, image: DisjointTensor[u8, 2], iters: i32):
    height = image.shape[0]
    width = image.shape[1]
    pixel_size_x = (max_x - min_x) / width
    pixel_size_y = (max_y - min_y) / height
    start_x, start_y = simt.grid(2)
    grid_x, grid_y = simt.gridsize(2)
    for x in range(start_x, width, grid_x):
        real = min_x + x * pixel_size_x
        for y in range(start_y, height, grid_y):
            imag = min_y + y * pixel_size_y
            image[y, x] = u8(mandel(real, imag, iters))
