"""CUDA samples' ``convolutionSeparable``: the row and column passes of a separable convolution,
each block staging its tile and halo in shared memory (``ROWS_*``/``COLUMNS_*`` geometry, a
``KERNEL_RADIUS``-tap filter). The sample keeps the filter in ``__constant__`` memory set at run
time; here it is an array parameter. Pixels past the image's edge read as zero, as in the sample."""

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i32

KERNEL_RADIUS = 8
KERNEL_LENGTH = 2 * KERNEL_RADIUS + 1
ROWS_BLOCKDIM_X = 16
ROWS_BLOCKDIM_Y = 4
ROWS_RESULT_STEPS = 8
ROWS_HALO_STEPS = 1
COLUMNS_BLOCKDIM_X = 16
COLUMNS_BLOCKDIM_Y = 8
COLUMNS_RESULT_STEPS = 8
COLUMNS_HALO_STEPS = 1


@simt.kernel(block=(ROWS_BLOCKDIM_X, ROWS_BLOCKDIM_Y),
             requires=["len(d_src) == image_w * image_h", "len(d_dst) == len(d_src)", "len(c_kernel) == KERNEL_LENGTH"])
def convolution_rows(d_dst: DisjointSlice[f32], d_src: Slice[f32], c_kernel: Slice[f32], image_w: i32, image_h: i32):
    with simt.unsafe():
        s_data = simt.shared_array(f32, (ROWS_BLOCKDIM_Y, (ROWS_RESULT_STEPS + 2 * ROWS_HALO_STEPS) * ROWS_BLOCKDIM_X))
        tx = simt.thread_idx.x
        ty = simt.thread_idx.y
        base_x = (simt.block_idx.x * ROWS_RESULT_STEPS - ROWS_HALO_STEPS) * ROWS_BLOCKDIM_X + tx
        base_y = simt.block_idx.y * ROWS_BLOCKDIM_Y + ty
        row = base_y * image_w
        for i in range(ROWS_RESULT_STEPS + 2 * ROWS_HALO_STEPS):
            x = base_x + i * ROWS_BLOCKDIM_X
            inside = x >= 0 and x < image_w and base_y < image_h
            s_data[ty, tx + i * ROWS_BLOCKDIM_X] = d_src[row + x] if inside else 0.0
        simt.sync_threads()
        for i in range(ROWS_HALO_STEPS, ROWS_HALO_STEPS + ROWS_RESULT_STEPS):
            x = base_x + i * ROWS_BLOCKDIM_X
            if x < image_w and base_y < image_h:
                total = f32(0.0)
                for j in range(-KERNEL_RADIUS, KERNEL_RADIUS + 1):
                    total += c_kernel[KERNEL_RADIUS - j] * s_data[ty, tx + i * ROWS_BLOCKDIM_X + j]
                d_dst[row + x] = total


@simt.kernel(block=(COLUMNS_BLOCKDIM_X, COLUMNS_BLOCKDIM_Y),
             requires=["len(d_src) == image_w * image_h", "len(d_dst) == len(d_src)", "len(c_kernel) == KERNEL_LENGTH"])
def convolution_columns(d_dst: DisjointSlice[f32], d_src: Slice[f32], c_kernel: Slice[f32], image_w: i32, image_h: i32):
    with simt.unsafe():
        s_data = simt.shared_array(
            f32, (COLUMNS_BLOCKDIM_X, (COLUMNS_RESULT_STEPS + 2 * COLUMNS_HALO_STEPS) * COLUMNS_BLOCKDIM_Y + 1))
        tx = simt.thread_idx.x
        ty = simt.thread_idx.y
        base_x = simt.block_idx.x * COLUMNS_BLOCKDIM_X + tx
        base_y = (simt.block_idx.y * COLUMNS_RESULT_STEPS - COLUMNS_HALO_STEPS) * COLUMNS_BLOCKDIM_Y + ty
        for i in range(COLUMNS_RESULT_STEPS + 2 * COLUMNS_HALO_STEPS):
            y = base_y + i * COLUMNS_BLOCKDIM_Y
            inside = y >= 0 and y < image_h and base_x < image_w
            s_data[tx, ty + i * COLUMNS_BLOCKDIM_Y] = d_src[y * image_w + base_x] if inside else 0.0
        simt.sync_threads()
        for i in range(COLUMNS_HALO_STEPS, COLUMNS_HALO_STEPS + COLUMNS_RESULT_STEPS):
            y = base_y + i * COLUMNS_BLOCKDIM_Y
            if y < image_h and base_x < image_w:
                total = f32(0.0)
                for j in range(-KERNEL_RADIUS, KERNEL_RADIUS + 1):
                    total += c_kernel[KERNEL_RADIUS - j] * s_data[tx, ty + i * COLUMNS_BLOCKDIM_Y + j]
                d_dst[y * image_w + base_x] = total
