"""The row kernels of example_kernels.rows on the CPU emulator, against NumPy, at ragged sizes.

Each case takes a specialisation the planner gives a different plan (one warp a row, rows
over warps, a row over several warps, a row over several tiles, a row streamed in chunks, a
loss over several chunks) and a shape that leaves ragged rows and columns. The same kernels run against
torch on a GPU in tests/gpu/test_rows.py.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from buildtile.emulate.direct import TileKernel, bf16_bits, bf16_values

from buildtile.backend import CompileOptions
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends

ROOT = Path(__file__).parent.parent
ROWS = ROOT / "example_project/example_kernels/rows.py"


@cache
def emulated(name: str, dtype: str, tile_shape: tuple[int, ...]) -> TileKernel:
    """The specialisation of kernel ``name`` for ``dtype`` (its ``T``) and ``tile_shape``."""
    registry = backends()
    (src,) = [s for s in find_kernels(KernelModule("example_kernels.rows", ROWS), registry, ROOT) if s.name == name]
    impl = registry["tile"].impl
    kernel = impl.analyze(src, CompileOptions())
    (spec,) = [s for s in impl.specializations(kernel) if tuple(next(iter(s.tile_shapes.values()))) == tile_shape
               and dict(s.spec.dtypes)["T"] == dtype]
    return TileKernel(spec, kernel.params)


def to_device(a: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return bf16_bits(a)
    return a.astype(np.float16 if dtype == "f16" else np.float32)


def from_device(a: np.ndarray, dtype: str) -> np.ndarray:
    return (bf16_values(a) if dtype == "bf16" else a).astype(np.float64)


def empty(shape, dtype: str) -> np.ndarray:
    return np.zeros(shape, np.uint16 if dtype == "bf16" else np.float16 if dtype == "f16" else np.float32)


TOLERANCE = {"f32": 2e-5, "bf16": 2e-2, "f16": 4e-3}

#: (dtype, tile shape, array shape): whole rows in one tile, and rows over several tiles
CASES = [("f32", (4, 1024), (5, 1000)), ("f32", (32, 256), (33, 200)), ("f32", (32, 256), (3, 600)),
         ("bf16", (4, 1024), (9, 700)), ("f16", (32, 256), (3, 300)),
         # the streamed way: a row over several chunks, shorter than the tile, and over two tiles
         ("f32", (1, 65536), (3, 9000)), ("bf16", (1, 65536), (2, 70001))]


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("dtype,tile_shape,shape", CASES)
def test_softmax(dtype, tile_shape, shape):
    x = to_device(rng(1).standard_normal(shape) * 3, dtype)
    z = empty(shape, dtype)
    emulated("softmax", dtype, tile_shape)(x, z)
    xs = from_device(x, dtype)
    e = np.exp(xs - xs.max(axis=1, keepdims=True))
    np.testing.assert_allclose(from_device(z, dtype), e / e.sum(axis=1, keepdims=True),
                               rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype] / 10)


@pytest.mark.parametrize("dtype,tile_shape,shape", CASES)
def test_layernorm_one_pass_statistics(dtype, tile_shape, shape):
    x = to_device(rng(2).standard_normal(shape) + 50.0, dtype)     # far from zero: a naive one pass loses digits
    w = to_device(rng(3).standard_normal(shape[1]), dtype)
    b = to_device(rng(4).standard_normal(shape[1]), dtype)
    z = empty(shape, dtype)
    emulated("layernorm", dtype, tile_shape)(x, w, b, 1e-5, z)
    xs, ws, bs = (from_device(a, dtype) for a in (x, w, b))
    mean = xs.mean(axis=1, keepdims=True)
    want = (xs - mean) / np.sqrt(xs.var(axis=1, keepdims=True) + 1e-5) * ws + bs
    tol = TOLERANCE[dtype] * (1 if dtype == "f32" else 4)
    np.testing.assert_allclose(from_device(z, dtype), want, rtol=tol, atol=tol * 5)


@pytest.mark.parametrize("dtype,tile_shape,shape", CASES)
def test_rmsnorm(dtype, tile_shape, shape):
    x = to_device(rng(5).standard_normal(shape), dtype)
    w = to_device(rng(6).standard_normal(shape[1]), dtype)
    z = empty(shape, dtype)
    emulated("rmsnorm", dtype, tile_shape)(x, w, 1e-6, z)
    xs, ws = from_device(x, dtype), from_device(w, dtype)
    want = xs / np.sqrt((xs * xs).mean(axis=1, keepdims=True) + 1e-6) * ws
    np.testing.assert_allclose(from_device(z, dtype), want, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


# rows held in one tile (no longer than CE_CHUNK // rows) and streamed (longer: in quarter-tile
# chunks, or whole-tile chunks for one-row tiles), none a multiple of the chunk
@pytest.mark.parametrize("dtype,rows,shape", [("f32", 32, (33, 200)), ("bf16", 8, (9, 1000)), ("f16", 2, (3, 4000)),
                                              ("f32", 32, (33, 700)), ("f32", 8, (9, 2500)),
                                              ("bf16", 2, (3, 5000)), ("f16", 1, (2, 9000))])
def test_cross_entropy_one_pass(dtype, rows, shape):
    logits = to_device(rng(7).standard_normal(shape) * 4, dtype)
    target = rng(8).integers(0, shape[1], shape[0]).astype(np.int64)
    target[0] = shape[1] - 1                                    # the last column of a ragged chunk
    target[-1] = -100                                           # outside the row: picks nothing
    logits[0, 1] = -np.inf if dtype == "f32" else logits[0, 1]  # a masked-out logit adds nothing
    loss = np.full(shape[0], np.nan, np.float32)
    emulated("cross_entropy", dtype, (rows,))(logits, target, loss)
    xs = from_device(logits, dtype)
    top = xs.max(axis=1)
    picked = np.where(target >= 0, xs[np.arange(shape[0]), np.maximum(target, 0)], 0.0)
    want = np.log(np.exp(xs - top[:, None]).sum(axis=1)) + top - picked
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-4)
