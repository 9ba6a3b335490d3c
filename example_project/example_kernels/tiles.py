"""Tile kernels: each describes one tile of its output; the compiler maps the threads.

A host partitions every output into tiles and launches one block per tile::

    from buildtile import tile
    from example_kernels import tiles

    zp = tile.partition(z, [1024])             # picks the 1024-wide specialization
    tiles.add(x, y, zp).sync_on(stream)

Every kernel handles ragged edges (extents that are not a multiple of the
tile): loads outside the array read the padding value, stores outside it
are skipped.
"""

import math

from buildtile import tile
from buildtile.types import Tensor, bf16, f16, f32

#: columns of A (rows of B) loaded per step of the matmul loop
MATMUL_K_STEP = 32

#: the element type of the elementwise kernels: f32 (the default), f16 or bf16, each compiled ahead of time
T = tile.dtype_var("T", f32, f16, bf16)

#: tiles of whole rows or of row chunks, of at most 4096 elements; `tile.partition(z)` picks one per shape
ROW_TILES = tile.product(shape=("rows", "cols"), rows=[1, 4], cols=[1024, 4096, 256], max_elements=4096)


@tile.kernel(specialize=tile.product(shape=("n",), n=[1024, 4096]),
             requires=["x.shape[0] == z.shape[0]", "y.shape[0] == z.shape[0]"])
def add(x: Tensor[T, 1], y: Tensor[T, 1], z: tile.Out[T, 1]):
    """z = x + y, in any of T's dtypes."""
    z.store(tile.load_like(x, z) + tile.load_like(y, z))


@tile.kernel(specialize=tile.product(shape=("n",), n=[1024]),
             requires=["x.shape[0] == z.shape[0]", "y.shape[0] == z.shape[0]"])
def axpby(x: Tensor[T, 1], y: Tensor[T, 1], alpha: f32, beta: f32, z: tile.Out[T, 1]):
    """z = alpha * x + beta * y, computed in f32 and rounded once to the arrays' dtype."""
    tx = tile.load_like(x, z).astype(f32)
    ty = tile.load_like(y, z).astype(f32)
    z.store((alpha * tx + beta * ty).astype(z.dtype))


@tile.kernel(specialize=[{"z": [64, 64]}, {"z": [16, 256]}],
             requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]",
                       "scale.shape[0] == z.shape[1]", "bias.shape[0] == z.shape[1]"])
def scale_bias(x: Tensor[f32, 2], scale: Tensor[f32, 1], bias: Tensor[f32, 1], z: tile.Out[f32, 2]):
    """z = x * scale + bias, with one scale and bias per column (broadcast down the rows)."""
    cols = z.tile_shape[1]
    j = z.tile_id(1)
    s = tile.load(scale, (j,), (cols,))
    b = tile.load(bias, (j,), (cols,))
    z.store(tile.load_like(x, z) * s[None, :] + b[None, :])


@tile.kernel(specialize=ROW_TILES, requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]"])
def softmax(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    """Softmax of each row: one pass when a tile spans whole rows, else the row's statistics
    are gathered over its tiles first (a block reads the whole row, writes its own tile)."""
    rows, cols = z.tile_shape
    t = tile.load_like(x, z, padding=-math.inf)
    if z.num_tiles(1) == 1:
        e = tile.exp(t - tile.max(t, axis=1)[:, None])
        z.store(e / tile.sum(e, axis=1)[:, None])
    else:
        i = z.tile_id(0)
        top = tile.full((rows,), -math.inf, f32)
        for k in tile.range(z.num_tiles(1)):
            top = tile.maximum(top, tile.max(tile.load(x, (i, k), (rows, cols), padding=-math.inf), axis=1))
        total = tile.zeros((rows,), f32)
        for k in tile.range(z.num_tiles(1)):
            part = tile.load(x, (i, k), (rows, cols), padding=-math.inf)
            total = total + tile.sum(tile.exp(part - top[:, None]), axis=1)
        z.store(tile.exp(t - top[:, None]) / total[:, None])


@tile.kernel(specialize=[{"z": [1, 1024]}, {"z": [4, 256]}],
             requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]",
                       "weight.shape[0] == z.shape[1]", "bias.shape[0] == z.shape[1]"])
def layernorm(x: Tensor[f32, 2], weight: Tensor[f32, 1], bias: Tensor[f32, 1], eps: f32, z: tile.Out[f32, 2]):
    """Layer normalisation of each row, then a per-column weight and bias. One pass when a tile
    spans whole rows, else the row's mean and variance are gathered over its tiles first."""
    rows, cols = z.tile_shape
    n = x.shape[1]
    i, j = z.tile_id(0), z.tile_id(1)
    t = tile.load_like(x, z)
    columns = tile.arange(cols)[None, :]
    if z.num_tiles(1) == 1:
        mean = tile.sum(t, axis=1) / n
        centered = tile.where(columns < n, t - mean[:, None], 0.0)
        var = tile.sum(centered * centered, axis=1) / n
    else:
        total = tile.zeros((rows,), f32)
        for k in tile.range(z.num_tiles(1)):
            total = total + tile.sum(tile.load(x, (i, k), (rows, cols)), axis=1)
        mean = total / n
        squares = tile.zeros((rows,), f32)
        for k in tile.range(z.num_tiles(1)):
            inside = columns + k * cols < n
            d = tile.where(inside, tile.load(x, (i, k), (rows, cols)) - mean[:, None], 0.0)
            squares = squares + tile.sum(d * d, axis=1)
        var = squares / n
        centered = t - mean[:, None]
    w = tile.load(weight, (j,), (cols,))
    b = tile.load(bias, (j,), (cols,))
    z.store(centered * (1.0 / tile.sqrt(var + eps))[:, None] * w[None, :] + b[None, :])


@tile.kernel(specialize=tile.product(shape=("rows",), rows=[64, 16]), requires=["x.shape[0] == z.shape[0]"])
def row_sum(x: Tensor[f32, 2], z: tile.Out[f32, 1]):
    """The sum of each row, any row length: the tile walks along the row in steps of 128 columns."""
    rows = z.tile_shape[0]
    i = z.tile_id(0)
    acc = tile.zeros((rows,), f32)
    for k in tile.range(tile.cdiv(x.shape[1], 128)):
        acc += tile.sum(tile.load(x, (i, k), (rows, 128)), axis=1)
    z.store(acc)


@tile.kernel(specialize=[{"c": [128, 128]}, {"c": [64, 64]}, {"c": [128, 256]}],
             requires=["a.shape[0] == c.shape[0]", "b.shape[1] == c.shape[1]", "a.shape[1] == b.shape[0]"])
def matmul_f16(a: Tensor[f16, 2], b: Tensor[f16, 2], c: tile.Out[f16, 2]):
    """c = a @ b on tensor cores, f16 inputs, f32 accumulation, f16 result."""
    bm, bn = c.tile_shape
    i, j = c.tile_id(0), c.tile_id(1)
    acc = tile.zeros((bm, bn), f32)
    for k in tile.range(tile.cdiv(a.shape[1], MATMUL_K_STEP)):
        ta = tile.load(a, (i, k), (bm, MATMUL_K_STEP))
        tb = tile.load(b, (k, j), (MATMUL_K_STEP, bn))
        acc = tile.mma(ta, tb, acc)
    c.store(acc.astype(f16))


@tile.kernel(specialize=[{"c": [128, 128]}, {"c": [64, 64]}, {"c": [128, 256]}],
             requires=["a.shape[0] == c.shape[0]", "b.shape[1] == c.shape[1]", "a.shape[1] == b.shape[0]"])
def matmul_bf16(a: Tensor[bf16, 2], b: Tensor[bf16, 2], c: tile.Out[bf16, 2]):
    """c = a @ b on tensor cores, bf16 inputs, f32 accumulation, bf16 result."""
    bm, bn = c.tile_shape
    i, j = c.tile_id(0), c.tile_id(1)
    acc = tile.zeros((bm, bn), f32)
    for k in tile.range(tile.cdiv(a.shape[1], MATMUL_K_STEP)):
        ta = tile.load(a, (i, k), (bm, MATMUL_K_STEP))
        tb = tile.load(b, (k, j), (MATMUL_K_STEP, bn))
        acc = tile.mma(ta, tb, acc)
    c.store(acc.astype(bf16))
