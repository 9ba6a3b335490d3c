"""CUDA samples' ``matrixMul``: C = A * B over flat row-major arrays, BLOCK_SIZE x BLOCK_SIZE tiles
of A and B staged in shared memory, the tile loop walking ``a`` along A's row and ``b`` down B's
column as the sample does (with bounds checks added for sizes that are not multiples of the
tile), and the result written at ``c + wB * ty + tx``."""

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i32

BLOCK_SIZE = 16


@simt.kernel(block=(BLOCK_SIZE, BLOCK_SIZE), requires=["len(a) == h_a * w_a", "len(b) == w_a * w_b",
                                                       "len(c) == h_a * w_b"])
def matrix_mul_cuda(c: DisjointSlice[f32], a: Slice[f32], b: Slice[f32], h_a: i32, w_a: i32, w_b: i32):
    bx = simt.block_idx.x
    by = simt.block_idx.y
    tx = simt.thread_idx.x
    ty = simt.thread_idx.y
    a_begin = w_a * BLOCK_SIZE * by
    a_end = a_begin + w_a - 1
    a_step = BLOCK_SIZE
    b_begin = BLOCK_SIZE * bx
    b_step = BLOCK_SIZE * w_b
    c_sub = f32(0.0)
    row = by * BLOCK_SIZE + ty
    col = bx * BLOCK_SIZE + tx
    with simt.unsafe():
        a_s = simt.shared_array(f32, (BLOCK_SIZE, BLOCK_SIZE))
        b_s = simt.shared_array(f32, (BLOCK_SIZE, BLOCK_SIZE))
        ia = a_begin
        ib = b_begin
        k0 = 0
        while ia <= a_end:
            a_s[ty, tx] = a[ia + w_a * ty + tx] if row < h_a and k0 + tx < w_a else 0.0
            b_s[ty, tx] = b[ib + w_b * ty + tx] if k0 + ty < w_a and col < w_b else 0.0
            simt.sync_threads()
            for k in range(BLOCK_SIZE):
                c_sub += a_s[ty, k] * b_s[k, tx]
            simt.sync_threads()
            ia += a_step
            ib += b_step
            k0 += BLOCK_SIZE
        c_begin = w_b * BLOCK_SIZE * by + BLOCK_SIZE * bx
        if row < h_a and col < w_b:
            c[c_begin + w_b * ty + tx] = c_sub


@simt.kernel(block=(BLOCK_SIZE, BLOCK_SIZE), requires=["len(a) == h_a * w_a", "len(b) == w_a * w_b",
                                                       "len(c) == h_a * w_b"])
def matrix_mul_checked(c: DisjointSlice[f32], a: Slice[f32], b: Slice[f32], h_a: i32, w_a: i32, w_b: i32):
    """The same tiles, the result written at ``row * w_b + col`` outside ``simt.unsafe()``: the
    compiler proves each thread writes its own element."""
    row, col = simt.index_2d()
    tx = simt.thread_idx.x
    ty = simt.thread_idx.y
    c_sub = f32(0.0)
    with simt.unsafe():
        a_s = simt.shared_array(f32, (BLOCK_SIZE, BLOCK_SIZE))
        b_s = simt.shared_array(f32, (BLOCK_SIZE, BLOCK_SIZE))
        for k0 in range(0, w_a, BLOCK_SIZE):
            a_s[ty, tx] = a[row * w_a + k0 + tx] if row < h_a and k0 + tx < w_a else 0.0
            b_s[ty, tx] = b[(k0 + ty) * w_b + col] if k0 + ty < w_a and col < w_b else 0.0
            simt.sync_threads()
            for k in range(BLOCK_SIZE):
                c_sub += a_s[ty, k] * b_s[k, tx]
            simt.sync_threads()
    if row < h_a and col < w_b:
        c[row * w_b + col] = c_sub
