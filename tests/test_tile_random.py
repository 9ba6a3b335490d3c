"""tile.rand / tile.randn (tests/tile_random_cases.py) on the CPU emulator: the stream of
buildtile.random's NumPy reference, element for element, at ragged sizes. The same kernels run on
a GPU in tests/gpu/test_tile_random_streams.py."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from buildtile.emulate.direct import TileKernel

from buildtile import random
from buildtile.backend import CompileOptions
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends

ROOT = Path(__file__).parent.parent
CASES = Path(__file__).parent / "tile_random_cases.py"


@cache
def emulated(name: str, tile_shape: tuple) -> TileKernel:
    registry = backends()
    (src,) = [s for s in find_kernels(KernelModule("tile_random_cases", CASES), registry, ROOT) if s.name == name]
    impl = registry["tile"].impl
    kernel = impl.analyze(src, CompileOptions())
    (spec,) = [s for s in impl.specializations(kernel) if tuple(s.tile_shapes["z"]) == tile_shape]
    return TileKernel(spec, kernel.params)


@pytest.mark.parametrize("tile_shape", [(256,), (1024,)])
@pytest.mark.parametrize("n,seed", [(1, 0), (1000, 42), (3000, -7), (700, 2**40 + 3)])
def test_rand_is_the_uniform_stream_of_the_reference(tile_shape, n, seed):
    z = np.full(n, np.nan, np.float32)
    emulated("uniform_1d", tile_shape)(seed, z)
    np.testing.assert_array_equal(z, random.uniform(seed, np.arange(n, dtype=np.int64)))


def test_the_stream_does_not_depend_on_the_tile_shape():
    small, large = np.zeros((2, 1500), np.float32)
    emulated("uniform_1d", (256,))(9, small)
    emulated("uniform_1d", (1024,))(9, large)
    np.testing.assert_array_equal(small, large)
    assert len(np.unique(small)) > 1490      # and the numbers differ from offset to offset


@pytest.mark.parametrize("shape,seed,base", [((16, 64), 3, 0), ((37, 100), -1, 2**33)])
def test_randn_is_the_normal_stream_of_the_reference(shape, seed, base):
    z = np.full(shape, np.nan, np.float32)
    emulated("normal_2d", (16, 64))(seed, base, z)
    offsets = base + np.arange(shape[0] * shape[1], dtype=np.int64).reshape(shape)
    want = random.normal(np.int32(seed), offsets)
    np.testing.assert_allclose(z, want, rtol=1e-5, atol=1e-5)   # the device's log and cospi: a few ulp


@pytest.mark.parametrize("n", [512, 1999])
def test_dropout_keeps_what_the_reference_keeps(n):
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    z = np.full(n, np.nan, np.float32)
    emulated("dropout", (512,))(x, 0.25, 11, z)
    keep = random.uniform(11, np.arange(n, dtype=np.int32)) >= np.float32(0.25)
    np.testing.assert_allclose(z, np.where(keep, x * np.float32(1 / 0.75), 0.0), rtol=1e-6)
    assert 0.6 < keep.mean() < 0.9


def test_a_scalar_offset_draws_one_number_per_tile():
    z = np.full(300, np.nan, np.float32)
    emulated("one_draw_per_tile", (128,))(5, z)
    np.testing.assert_allclose(z, random.normal(5, np.arange(300) // 128), rtol=1e-5, atol=1e-5)
