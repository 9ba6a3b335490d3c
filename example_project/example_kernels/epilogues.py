"""Matmuls with fused epilogues: the product's f32 accumulator is finished in registers and stored
once, in the inputs' dtype, instead of being written out and read back by the next operation.

    from buildtile import tile
    from example_kernels import epilogues

    c = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    epilogues.matmul_bias_gelu_bf16(a, b, bias, tile.partition(c, [128, 256])).sync_on(stream)
    # c == gelu(a @ b + bias), as torch.nn.functional.gelu(a @ b + bias) computes it unfused

- ``matmul_bias_gelu_{bf16,f16}``: ``c = gelu(a @ b + bias)`` (the exact, erf form), ``bias`` one
  value per column (length N) in the inputs' dtype;
- ``matmul_residual_{bf16,f16}``: ``c = alpha * (a @ b) + residual``, ``alpha`` a scalar,
  ``residual`` M x N in the inputs' dtype.

``a`` is M x K and ``b`` K x N; no extent needs to be a multiple of the tile or of the K step.
The K loop is the plain matmul step, so on Hopper (``sm_90a``) it takes the wgmma path fed by
TMA (see example_kernels.tiles for the plain matmuls); the epilogue runs on the accumulator where
the product leaves it.
"""

from buildtile import tile
from buildtile.types import Tensor, bf16, f16, f32

#: columns of A (rows of B) loaded per step: 64 bf16 or f16 values are one 128-byte swizzled
#: row on Hopper, its fastest operand layout
K_STEP = 64

#: the tiles of tiles.matmul_*: one and two warpgroups on Hopper, and a small one for small products
MATMUL_TILES = [{"c": [128, 256]}, {"c": [128, 128]}, {"c": [64, 64]}]


@tile.kernel(specialize=MATMUL_TILES,
             requires=["a.shape[0] == c.shape[0]", "b.shape[1] == c.shape[1]", "a.shape[1] == b.shape[0]",
                       "bias.shape[0] == c.shape[1]"])
def matmul_bias_gelu_bf16(a: Tensor[bf16, 2], b: Tensor[bf16, 2], bias: Tensor[bf16, 1], c: tile.Out[bf16, 2]):
    """c = gelu(a @ b + bias): bf16 inputs, f32 accumulation and epilogue, bf16 result."""
    bm, bn = c.tile_shape
    i, j = c.tile_id(0), c.tile_id(1)
    acc = tile.zeros((bm, bn), f32)
    for k in tile.range(tile.cdiv(a.shape[1], K_STEP)):
        ta = tile.load(a, (i, k), (bm, K_STEP))
        tb = tile.load(b, (k, j), (K_STEP, bn))
        acc = tile.mma(ta, tb, acc)
    z = acc + tile.load(bias, (j,), (bn,)).astype(f32)[None, :]
    c.store(tile.gelu(z).astype(bf16))


@tile.kernel(specialize=MATMUL_TILES,
             requires=["a.shape[0] == c.shape[0]", "b.shape[1] == c.shape[1]", "a.shape[1] == b.shape[0]",
                       "bias.shape[0] == c.shape[1]"])
def matmul_bias_gelu_f16(a: Tensor[f16, 2], b: Tensor[f16, 2], bias: Tensor[f16, 1], c: tile.Out[f16, 2]):
    """c = gelu(a @ b + bias): f16 inputs, f32 accumulation and epilogue, f16 result."""
    bm, bn = c.tile_shape
    i, j = c.tile_id(0), c.tile_id(1)
    acc = tile.zeros((bm, bn), f32)
    for k in tile.range(tile.cdiv(a.shape[1], K_STEP)):
        ta = tile.load(a, (i, k), (bm, K_STEP))
        tb = tile.load(b, (k, j), (K_STEP, bn))
        acc = tile.mma(ta, tb, acc)
    z = acc + tile.load(bias, (j,), (bn,)).astype(f32)[None, :]
    c.store(tile.gelu(z).astype(f16))


@tile.kernel(specialize=MATMUL_TILES,
             requires=["a.shape[0] == c.shape[0]", "b.shape[1] == c.shape[1]", "a.shape[1] == b.shape[0]",
                       "residual.shape[0] == c.shape[0]", "residual.shape[1] == c.shape[1]"])
def matmul_residual_bf16(a: Tensor[bf16, 2], b: Tensor[bf16, 2], residual: Tensor[bf16, 2], alpha: f32,
                         c: tile.Out[bf16, 2]):
    """c = alpha * (a @ b) + residual: bf16 inputs, f32 accumulation and epilogue, bf16 result."""
    bm, bn = c.tile_shape
    i, j = c.tile_id(0), c.tile_id(1)
    acc = tile.zeros((bm, bn), f32)
    for k in tile.range(tile.cdiv(a.shape[1], K_STEP)):
        ta = tile.load(a, (i, k), (bm, K_STEP))
        tb = tile.load(b, (k, j), (K_STEP, bn))
        acc = tile.mma(ta, tb, acc)
    c.store((alpha * acc + tile.load_like(residual, c).astype(f32)).astype(bf16))


@tile.kernel(specialize=MATMUL_TILES,
             requires=["a.shape[0] == c.shape[0]", "b.shape[1] == c.shape[1]", "a.shape[1] == b.shape[0]",
                       "residual.shape[0] == c.shape[0]", "residual.shape[1] == c.shape[1]"])
def matmul_residual_f16(a: Tensor[f16, 2], b: Tensor[f16, 2], residual: Tensor[f16, 2], alpha: f32,
                        c: tile.Out[f16, 2]):
    """c = alpha * (a @ b) + residual: f16 inputs, f32 accumulation and epilogue, f16 result."""
    bm, bn = c.tile_shape
    i, j = c.tile_id(0), c.tile_id(1)
    acc = tile.zeros((bm, bn), f32)
    for k in tile.range(tile.cdiv(a.shape[1], K_STEP)):
        ta = tile.load(a, (i, k), (bm, K_STEP))
        tb = tile.load(b, (k, j), (K_STEP, bn))
        acc = tile.mma(ta, tb, acc)
    c.store((alpha * acc + tile.load_like(residual, c).astype(f32)).astype(f16))
