"""Tile kernels that exercise one language feature each, run on the CPU emulator
(tests/test_tile_emulated.py) and compiled to cubin (tests/test_tile_codegen.py)."""

import math

from buildtile import tile
from buildtile.types import Tensor, bf16, f16, f32, i32

ROWS = 16


@tile.kernel(specialize=[{"z": [256]}])
def relu_scaled(x: Tensor[f32, 1], alpha: f32, z: tile.Out[f32, 1]):
    """where, a scalar parameter, a literal meeting a tile."""
    t = tile.load_like(x, z)
    z.store(tile.where(t > 0.0, t * alpha, 0.0))


@tile.kernel(specialize=[{"z": [512]}])
def half_affine(x: Tensor[f16, 1], z: tile.Out[f16, 1]):
    """f16 arithmetic, rounded after every operation."""
    t = tile.load_like(x, z)
    z.store(t * 2.0 + 1.0)


@tile.kernel(specialize=[{"z": [128]}])
def index_pattern(z: tile.Out[i32, 1]):
    """arange, integer tiles, // and %, a scalar meeting an i32 tile, num_tiles."""
    n = z.tile_shape[0]
    first = z.tile_id(0) * n
    idx = tile.arange(n, i32) + i32(first)
    z.store(idx * 3 % 7 + idx // 5 + i32(z.num_tiles(0)))


@tile.kernel(specialize=[{"z": [32, 64]}])
def transpose(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    """z = x.T: the tile of x at the transposed index, transposed."""
    rows, cols = z.tile_shape
    t = tile.load(x, (z.tile_id(1), z.tile_id(0)), (cols, rows))
    z.store(tile.transpose(t))


@tile.kernel(specialize=[{"z": [1024]}])
def flatten(x: Tensor[f32, 2], z: tile.Out[f32, 1]):
    """reshape: 16 rows of 64 become one 1024-wide tile (x has 64 columns)."""
    t = tile.load(x, (z.tile_id(0), 0), (ROWS, 64))
    z.store(t.reshape(1024) + 0.5)


@tile.kernel(specialize=[{"z": [2, 8, 32]}])
def add3d(x: Tensor[f32, 3], y: Tensor[f32, 3], z: tile.Out[f32, 3]):
    """3-D tiles over a 3-D grid."""
    z.store(tile.load_like(x, z) - tile.load_like(y, z))


@tile.kernel(specialize=[{"z": [64]}])
def col_sum(x: Tensor[f32, 2], z: tile.Out[f32, 1]):
    """A reduction along axis 0 (across warps), accumulated over a loop."""
    cols = z.tile_shape[0]
    j = z.tile_id(0)
    acc = tile.zeros((cols,), f32)
    for k in tile.range(tile.cdiv(x.shape[0], 32)):
        acc = acc + tile.sum(tile.load(x, (k, j), (32, cols)), axis=0)
    tile.store(z, (j,), acc)


@tile.kernel(specialize=[{"z": [32, 32]}])
def row_max_to_cols(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    """keepdims, max/min, and a row vector used as a column (moves data between threads)."""
    t = tile.load_like(x, z, padding=-math.inf)
    spread = tile.max(t, axis=1, keepdims=True) - tile.min(tile.where(t == -math.inf, math.inf, t), axis=1)[:, None]
    z.store(tile.where(t == -math.inf, 0.0, spread + tile.max(t, axis=1)[None, :]))


@tile.kernel(specialize=[{"z": [256]}])
def smooth(x: Tensor[f32, 1], beta: f32, z: tile.Out[f32, 1]):
    """math functions, a run-time fill value, an `if` on scalars."""
    t = tile.load_like(x, z)
    out = tile.sigmoid(t) + tile.tanh(t) * tile.exp(-tile.abs(t))
    if beta > 0.0:
        out = out + tile.full((256,), beta, f32)
    z.store(out)


@tile.kernel(specialize=[{"c": [64, 32]}])
def matmul_registers(a: Tensor[f32, 2], b: Tensor[bf16, 2], c: tile.Out[f32, 2]):
    """mma of operands that are computed (not loaded as-is): staged from registers."""
    bm, bn = c.tile_shape
    acc = tile.zeros((bm, bn), f32)
    for k in tile.range(tile.cdiv(a.shape[1], 32)):
        ta = tile.load(a, (c.tile_id(0), k), (bm, 32)).astype(bf16)
        acc = tile.mma(ta, tile.load(b, (k, c.tile_id(1)), (32, bn)), acc)
    c.store(acc * 0.5)


@tile.kernel(specialize=[{"c": [64, 32]}])
def matmul_transposed_operands(a: Tensor[f16, 2], b: Tensor[f16, 2], c: tile.Out[f32, 2]):
    """c = a^T @ b^T, a stored K x M and b N x K: both operands read transposed from the stages
    of the pipeline (the other form of ldmatrix), never transposed in memory."""
    bm, bn = c.tile_shape
    acc = tile.zeros((bm, bn), f32)
    for k in tile.range(tile.cdiv(a.shape[0], 32)):
        at = tile.load(a, (k, c.tile_id(0)), (32, bm))
        bt = tile.load(b, (c.tile_id(1), k), (bn, 32))
        acc = tile.mma(at.T, bt.T, acc)
    c.store(acc)


@tile.kernel(specialize=[{"c": [64, 32]}])
def chained_mma(a: Tensor[f16, 2], b: Tensor[f16, 2], d: Tensor[f16, 2], c: tile.Out[f32, 2]):
    """c = sum over blocks k of relu(a @ b[:, k]) @ d[k, :]: the block of a is loaded once and kept
    in shared memory for every step, and the first mma's result, rounded, is the second's A
    operand straight from registers (every warp takes whole rows of both)."""
    bm, bn = c.tile_shape
    ta = tile.load(a, (c.tile_id(0), 0), (bm, 32))
    acc = tile.zeros((bm, bn), f32)
    for k in tile.range(tile.cdiv(b.shape[1], 32)):
        tb = tile.load(b, (0, k), (32, 32))
        td = tile.load(d, (k, c.tile_id(1)), (32, bn))
        h = tile.maximum(tile.mma(ta, tb, tile.zeros((bm, 32), f32)), 0.0)
        acc = tile.mma(h.astype(f16), td, acc)
    c.store(acc)
