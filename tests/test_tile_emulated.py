"""Tile kernels executed on the CPU emulator (buildtile.emulate) against NumPy, at ragged sizes.

The emulator runs the exact LLVM IR the GPU gets, with the PTX-level
operations (shuffles, ldmatrix, mma.sync, cp.async, barriers, predicated and
vector accesses) implemented from the PTX ISA in C and each GPU thread a
coroutine of its own -- so a wrong layout, swizzle, fragment mapping, mask or missing
barrier fails here, without a GPU. The same kernels run on a real GPU in
tests/gpu/test_tile_kernels.py.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from buildtile.emulate.direct import TileKernel, bf16_bits, bf16_values

from buildtile.backend import CompileOptions
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends

ROOT = Path(__file__).parent.parent
MODULES = {"tiles": (ROOT / "example_project/example_kernels/tiles.py", "example_kernels.tiles"),
           "cases": (Path(__file__).parent / "tile_cases.py", "tile_cases")}


@cache
def emulated(module: str, name: str, tile_shapes: tuple | None = None) -> TileKernel:
    """The kernel's specialization with these tile shapes (the first one by default), ready to run."""
    path, dotted = MODULES[module]
    registry = backends()
    (src,) = [s for s in find_kernels(KernelModule(dotted, path), registry, ROOT) if s.name == name]
    impl = registry["tile"].impl
    kernel = impl.analyze(src, CompileOptions())
    specs = impl.specializations(kernel)
    if tile_shapes is not None:
        specs = [s for s in specs if tuple(tuple(v) for v in s.tile_shapes.values()) == tile_shapes]
    return TileKernel(specs[0], kernel.params)


def rng(seed=0):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------- the example kernels


@pytest.mark.parametrize("n", [1, 1000, 4096, 5000])
def test_add_matches_numpy(n):
    x, y = rng(n).standard_normal((2, n)).astype(np.float32)
    z = np.full(n, np.nan, np.float32)
    emulated("tiles", "add")(x, y, z)
    np.testing.assert_array_equal(z, x + y)


def test_add_reads_strided_and_misaligned_views():
    base = rng().standard_normal(4001).astype(np.float32)
    x, y = base[::2], base[1:2001]            # a stride of 2; a pointer 4 bytes past alignment
    z = np.full(2001, np.nan, np.float32)[:2000]
    emulated("tiles", "add")(x, y[:2000], z)
    np.testing.assert_array_equal(z, x[:2000] + y[:2000])


@pytest.mark.parametrize("tile_shape", [(64, 64), (16, 256)])
def test_scale_bias_broadcasts_per_column(tile_shape):
    x = rng(1).standard_normal((130, 300)).astype(np.float32)
    scale, bias = rng(2).standard_normal((2, 300)).astype(np.float32)
    z = np.full(x.shape, np.nan, np.float32)
    emulated("tiles", "scale_bias", (tile_shape,))(x, scale, bias, z)
    np.testing.assert_allclose(z, x * scale + bias, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("tile_shape,shape", [((1, 1024), (3, 1000)), ((1, 4096), (2, 4096)), ((4, 256), (9, 200)),
                                              ((1, 1024), (2, 3000)), ((4, 256), (5, 700))])   # rows wider than a tile
def test_softmax_rows_matches_numpy(tile_shape, shape):
    x = (rng(3).standard_normal(shape) * 4).astype(np.float32)
    z = np.full(shape, np.nan, np.float32)
    emulated("tiles", "softmax", (tile_shape,))(x, z)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(z, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("tile_shape,shape", [((1, 1024), (3, 1000)), ((4, 256), (6, 256)),
                                              ((1, 1024), (2, 2500)), ((4, 256), (5, 700))])   # rows wider than a tile
def test_layernorm_matches_numpy(tile_shape, shape):
    x = rng(4).standard_normal(shape).astype(np.float32)
    w, b = rng(5).standard_normal((2, shape[1])).astype(np.float32)
    z = np.full(shape, np.nan, np.float32)
    emulated("tiles", "layernorm", (tile_shape,))(x, w, b, 1e-5, z)
    mean = x.mean(axis=1, keepdims=True)
    want = (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(z, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 1), (70, 300)])
def test_row_sum_walks_the_row(shape):
    x = rng(6).standard_normal(shape).astype(np.float32)
    z = np.full(shape[0], np.nan, np.float32)
    emulated("tiles", "row_sum")(x, z)
    np.testing.assert_allclose(z, x.sum(axis=1), rtol=1e-5, atol=1e-5)


MATMUL_SHAPES = [(1, 1, 1), (70, 50, 45), (130, 136, 104)]   # K=104 takes the cp.async path, 45 the masked one


@pytest.mark.parametrize("tile_shape", [(128, 128), (64, 64), (128, 256)])
@pytest.mark.parametrize("m,n,k", MATMUL_SHAPES)
def test_matmul_bf16_accumulates_in_f32(tile_shape, m, n, k):
    a = bf16_bits(rng(7).standard_normal((m, k)))
    b = bf16_bits(rng(8).standard_normal((k, n)))
    c = np.zeros((m, n), np.uint16)
    emulated("tiles", "matmul_bf16", (tile_shape,))(a, b, c)
    want = bf16_values(a).astype(np.float64) @ bf16_values(b)
    np.testing.assert_allclose(bf16_values(c), want, rtol=1e-2, atol=1e-2 * math.sqrt(k))


@pytest.mark.parametrize("m,n,k", MATMUL_SHAPES)
def test_matmul_f16_accumulates_in_f32(m, n, k):
    a = rng(9).standard_normal((m, k)).astype(np.float16)
    b = rng(10).standard_normal((k, n)).astype(np.float16)
    c = np.zeros((m, n), np.float16)
    emulated("tiles", "matmul_f16")(a, b, c)
    np.testing.assert_allclose(c.astype(np.float32), a.astype(np.float64) @ b, rtol=2e-3, atol=2e-3 * math.sqrt(k))


def test_matmul_reads_a_transposed_operand():
    a = rng(11).standard_normal((96, 48)).astype(np.float16)
    b = np.ascontiguousarray(rng(12).standard_normal((80, 48)).astype(np.float16)).T   # column-major (48, 80)
    c = np.zeros((96, 80), np.float16)
    emulated("tiles", "matmul_f16")(a, b, c)
    np.testing.assert_allclose(c.astype(np.float32), a.astype(np.float64) @ b, rtol=2e-3, atol=2e-2)


# ---------------------------------------------------------------- one feature each


def test_where_with_a_scalar_parameter():
    x = rng(13).standard_normal(1000).astype(np.float32)
    z = np.full_like(x, np.nan)
    emulated("cases", "relu_scaled")(x, 0.5, z)
    np.testing.assert_array_equal(z, np.where(x > 0, x * np.float32(0.5), 0))


def test_f16_arithmetic_rounds_like_numpy():
    x = rng(14).standard_normal(1500).astype(np.float16)
    z = np.zeros_like(x)
    emulated("cases", "half_affine")(x, z)
    np.testing.assert_array_equal(z, x * np.float16(2) + np.float16(1))


def test_integer_tiles_and_arange():
    z = np.full(1000, -1, np.int32)
    emulated("cases", "index_pattern")(z)
    idx = np.arange(1000)
    np.testing.assert_array_equal(z, idx * 3 % 7 + idx // 5 + 8)   # 8 tiles of 128


def test_transpose():
    x = rng(15).standard_normal((100, 70)).astype(np.float32)
    z = np.full((70, 100), np.nan, np.float32)
    emulated("cases", "transpose")(x, z)
    np.testing.assert_array_equal(z, x.T)


def test_reshape():
    x = rng(16).standard_normal((40, 64)).astype(np.float32)
    z = np.full(40 * 64, np.nan, np.float32)
    emulated("cases", "flatten")(x, z)
    np.testing.assert_array_equal(z, x.reshape(-1) + np.float32(0.5))


def test_three_dimensional_tiles():
    x, y = rng(17).standard_normal((2, 5, 9, 40)).astype(np.float32)
    z = np.full(x.shape, np.nan, np.float32)
    emulated("cases", "add3d")(x, y, z)
    np.testing.assert_array_equal(z, x - y)


def test_reduction_across_warps_in_a_loop():
    x = rng(18).standard_normal((100, 150)).astype(np.float32)
    z = np.full(150, np.nan, np.float32)
    emulated("cases", "col_sum")(x, z)
    np.testing.assert_allclose(z, x.sum(axis=0), rtol=1e-5, atol=1e-5)


def test_row_vector_used_as_a_column_moves_between_threads():
    x = rng(19).standard_normal((40, 50)).astype(np.float32)
    z = np.full(x.shape, np.nan, np.float32)
    emulated("cases", "row_max_to_cols")(x, z)
    want = np.zeros_like(x)
    for i0 in range(0, 40, 32):
        for j0 in range(0, 50, 32):
            t = np.full((32, 32), -np.inf, np.float32)
            block = x[i0:i0 + 32, j0:j0 + 32]
            t[:block.shape[0], :block.shape[1]] = block
            real = np.where(t == -np.inf, np.inf, t)
            spread = t.max(axis=1, keepdims=True) - real.min(axis=1, keepdims=True)
            out = np.where(t == -np.inf, 0, spread + t.max(axis=1)[None, :])
            want[i0:i0 + 32, j0:j0 + 32] = out[:block.shape[0], :block.shape[1]]
    np.testing.assert_array_equal(z, want)


@pytest.mark.parametrize("beta", [0.0, 2.0])
def test_math_and_scalar_branches(beta):
    x = rng(20).standard_normal(300).astype(np.float32)
    z = np.full_like(x, np.nan)
    emulated("cases", "smooth")(x, beta, z)
    want = 1 / (1 + np.exp(-x)) + np.tanh(x) * np.exp(-np.abs(x)) + beta
    np.testing.assert_allclose(z, want, rtol=1e-5, atol=1e-6)


def test_mma_reads_both_operands_transposed_from_its_pipeline():
    a = rng(23).standard_normal((75, 70)).astype(np.float16)      # K x M
    b = rng(24).standard_normal((40, 75)).astype(np.float16)      # N x K
    c = np.full((70, 40), np.nan, np.float32)
    emulated("cases", "matmul_transposed_operands")(a, b, c)
    np.testing.assert_allclose(c, a.T.astype(np.float64) @ b.T, rtol=1e-3, atol=1e-3)


def test_chained_mma_feeds_its_result_from_registers():
    a = rng(25).standard_normal((70, 32)).astype(np.float16)
    b = rng(26).standard_normal((32, 75)).astype(np.float16)
    d = rng(27).standard_normal((75, 40)).astype(np.float16)
    c = np.full((70, 40), np.nan, np.float32)
    emulated("cases", "chained_mma")(a, b, d, c)
    h = np.maximum(a.astype(np.float64) @ b, 0).astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(c, h @ d, rtol=1e-3, atol=1e-2)


def test_mma_of_computed_operands():
    a = rng(21).standard_normal((70, 75)).astype(np.float32)
    b = bf16_bits(rng(22).standard_normal((75, 40)))
    c = np.full((70, 40), np.nan, np.float32)
    emulated("cases", "matmul_registers")(a, b, c)
    want = bf16_values(bf16_bits(a)).astype(np.float64) @ bf16_values(b) * 0.5
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-3)
