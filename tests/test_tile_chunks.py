"""Chunked stores (tests/tile_chunk_cases.py) on the CPU emulator against NumPy, at ragged sizes.

A block owns a tile larger than what it stores at once and writes it chunk
by chunk; the same kernels run on a GPU in tests/gpu/test_tile_chunk_stores.py.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from buildtile.emulate.direct import TileKernel

from buildtile.backend import CompileOptions
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends

ROOT = Path(__file__).parent.parent
CASES = Path(__file__).parent / "tile_chunk_cases.py"


@cache
def emulated(name: str, tile_shape: tuple) -> TileKernel:
    registry = backends()
    (src,) = [s for s in find_kernels(KernelModule("tile_chunk_cases", CASES), registry, ROOT) if s.name == name]
    impl = registry["tile"].impl
    kernel = impl.analyze(src, CompileOptions())
    (spec,) = [s for s in impl.specializations(kernel) if tuple(next(iter(s.tile_shapes.values()))) == tile_shape]
    return TileKernel(spec, kernel.params)


def data(shape, seed):
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(np.float32)


@pytest.mark.parametrize("tile_shape,shape", [((2, 256), (3, 300)), ((1, 1024), (2, 1000)), ((2, 256), (5, 70))])
def test_each_chunk_lands_at_its_index(tile_shape, shape):
    x = data(shape, 1)
    z = np.full(shape, np.nan, np.float32)
    emulated("chunk_index_added", tile_shape)(x, z)
    np.testing.assert_array_equal(z, x + (np.arange(shape[1]) // 64).astype(np.float32))


@pytest.mark.parametrize("tile_shape,shape", [((1, 1024), (3, 1000)), ((4, 256), (6, 200)), ((4, 256), (5, 256))])
def test_softmax_written_in_chunks_matches_numpy(tile_shape, shape):
    x = data(shape, 2)
    z = np.full(shape, np.nan, np.float32)
    emulated("softmax_chunked", tile_shape)(x, z)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(z, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("shape", [(64, 64), (100, 90)])
def test_chunks_along_both_axes_in_an_offset_loop(shape):
    x = data(shape, 3)
    z = np.full(shape, np.nan, np.float32)
    emulated("quadrants_reversed", (64, 64))(x, z)
    rows, cols = np.indices(shape)
    np.testing.assert_allclose(z, x * ((rows // 16) * 10 + cols // 32), rtol=1e-6)
