"""Generic and product-declared example kernels on the CPU emulator, against NumPy at ragged sizes.

`tiles.add` and `tiles.axpby` are generic over `T` (f32, f16, bf16), each
dtype compiled ahead of time; `tiles.softmax` takes its tile shapes from the
module's `ROW_TILES` product. The same kernels run on a GPU in
tests/gpu/test_tile_kernels.py.
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
TILES = ROOT / "example_project/example_kernels/tiles.py"


@cache
def analyzed(name: str):
    registry = backends()
    (src,) = [s for s in find_kernels(KernelModule("example_kernels.tiles", TILES), registry, ROOT) if s.name == name]
    return registry["tile"].impl.analyze(src, CompileOptions())


@cache
def emulated(name: str, tile_shape: tuple, dtype: str = "f32") -> TileKernel:
    kernel = analyzed(name)
    (spec,) = [s for s in kernel.ir
               if tuple(next(iter(s.tile_shapes.values()))) == tile_shape and dict(s.spec.dtypes).get("T", "f32") == dtype]
    return TileKernel(spec, kernel.params)


def rng(seed=0):
    return np.random.default_rng(seed)


def as_dtype(a: np.ndarray, dtype: str) -> np.ndarray:
    """``a`` in ``dtype``'s storage: float32, float16, or bf16 bit patterns."""
    return {"f32": lambda: a.astype(np.float32), "f16": lambda: a.astype(np.float16),
            "bf16": lambda: bf16_bits(a)}[dtype]()


def values(a: np.ndarray, dtype: str) -> np.ndarray:
    return bf16_values(a) if dtype == "bf16" else a.astype(np.float32)


def rounded(a: np.ndarray, dtype: str) -> np.ndarray:
    """``a`` (float32) rounded once to ``dtype``, as values."""
    return values(as_dtype(a, dtype), dtype)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("tile_shape", [(1024,), (4096,)])
@pytest.mark.parametrize("n", [1, 1000, 5000])
def test_generic_add_matches_numpy_in_each_dtype(dtype, tile_shape, n):
    x, y = (as_dtype(v, dtype) for v in rng(n).standard_normal((2, n)))
    z = np.zeros_like(x)
    emulated("add", tile_shape, dtype)(x, y, z)
    np.testing.assert_array_equal(values(z, dtype), rounded(values(x, dtype) + values(y, dtype), dtype))


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("n", [3, 1500])
def test_generic_axpby_computes_in_f32_and_rounds_once(dtype, n):
    x, y = (as_dtype(v, dtype) for v in rng(n + 1).standard_normal((2, n)))
    z = np.zeros_like(x)
    alpha, beta = 1.5, -0.25
    emulated("axpby", (1024,), dtype)(x, y, alpha, beta, z)
    want = (np.float32(alpha) * values(x, dtype) + np.float32(beta) * values(y, dtype)).astype(np.float32)
    np.testing.assert_allclose(values(z, dtype), rounded(want, dtype), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("tile_shape,shape", [((1, 256), (5, 200)), ((4, 1024), (7, 1000)),
                                              ((1, 256), (3, 700)), ((4, 1024), (6, 2500))])   # rows past a tile
def test_softmax_from_the_row_product_matches_numpy(tile_shape, shape):
    x = (rng(3).standard_normal(shape) * 4).astype(np.float32)
    z = np.full(shape, np.nan, np.float32)
    emulated("softmax", tile_shape)(x, z)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(z, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_the_row_product_keeps_tiles_of_at_most_4096_elements():
    shapes = [tuple(next(iter(s.tile_shapes.values()))) for s in analyzed("softmax").ir]
    assert shapes == [(1, 1024), (1, 4096), (1, 256), (4, 1024), (4, 256)]


ITEMSIZE_SOURCE = '''
from buildtile import tile
from buildtile.types import Tensor, bf16, f16, f32

T = tile.dtype_var("T", f32, f16, bf16)
CHUNK_BYTES = 64


@tile.kernel(specialize=[{"z": [128], "T": f32}, {"z": [128], "T": f16}, {"z": [128], "T": bf16}])
def itemsizes(x: Tensor[T, 1], z: tile.Out[f32, 1]):
    t = tile.load_like(x, z).astype(f32)
    n = CHUNK_BYTES // T.itemsize
    if x.dtype.itemsize < f32.itemsize:
        z.store(t * 0.0 + 1000.0 + n)
    else:
        z.store(t * 0.0 + 2000.0 + n + t.dtype.itemsize)
'''


@pytest.mark.parametrize("dtype,want", [("f32", 2000 + 16 + 4), ("f16", 1000 + 32), ("bf16", 1000 + 32)])
def test_itemsize_is_a_compile_time_constant_per_dtype(tmp_path, dtype, want):
    path = tmp_path / "itemsize_kernels.py"
    path.write_text(ITEMSIZE_SOURCE)
    registry = backends()
    (src,) = find_kernels(KernelModule("itemsize_kernels", path), registry, tmp_path)
    kernel = registry["tile"].impl.analyze(src, CompileOptions())
    (spec,) = [s for s in kernel.ir if dict(s.spec.dtypes)["T"] == dtype]
    x = as_dtype(rng(3).standard_normal(200), dtype)     # ragged: two tiles, the second partial
    z = np.full(200, np.nan, np.float32)
    TileKernel(spec, kernel.params)(x, z)
    np.testing.assert_array_equal(z, np.full(200, want, np.float32))


FOLDED_SOURCE = '''
from buildtile import tile
from buildtile.types import f32


@tile.kernel(specialize=[{"z": [1, 256]}, {"z": [4, 256]}])
def chunks(z: tile.Out[f32, 2]):
    rows, cols = z.tile_shape
    step = cols if rows == 1 else cols // 4          # a conditional expression of constants
    value = step * 1000.0 + max(step, 128) + min(step, 100) + abs(-3)
    part = tile.full((rows, step), value, f32)       # the folded width as a tile extent
    z.store(tile.max(part, axis=1)[:, None] + tile.zeros((rows, cols), f32))
'''


@pytest.mark.parametrize("tile_shape,want", [((1, 256), 256_000 + 256 + 100 + 3), ((4, 256), 64_000 + 128 + 64 + 3)])
def test_conditional_expressions_and_min_max_abs_of_constants_fold(tmp_path, tile_shape, want):
    """The chunk width is a tile extent, so it must fold at compile time; the stored value shows
    which branch and which bounds it folded to."""
    path = tmp_path / "folded_kernels.py"
    path.write_text(FOLDED_SOURCE)
    registry = backends()
    (src,) = find_kernels(KernelModule("folded_kernels", path), registry, tmp_path)
    kernel = registry["tile"].impl.analyze(src, CompileOptions())
    (spec,) = [s for s in kernel.ir if tuple(s.tile_shapes["z"]) == tile_shape]
    z = np.full((5, 300), np.nan, np.float32)            # ragged along both axes
    TileKernel(spec, kernel.params)(z)
    np.testing.assert_array_equal(z, np.full((5, 300), want, np.float32))
