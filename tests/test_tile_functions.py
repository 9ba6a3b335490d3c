"""Kernels built from ``@tile.function`` helpers (tests/tile_function_cases.py) on the CPU emulator,
against NumPy at ragged sizes; the same kernels run on a GPU in tests/gpu/test_tile_helper_functions.py."""

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
CASES = Path(__file__).parent / "tile_function_cases.py"


@cache
def emulated(name: str, tile_shape: tuple) -> TileKernel:
    registry = backends()
    (src,) = [s for s in find_kernels(KernelModule("tile_function_cases", CASES), registry, ROOT) if s.name == name]
    impl = registry["tile"].impl
    kernel = impl.analyze(src, CompileOptions())
    (spec,) = [s for s in impl.specializations(kernel) if tuple(s.tile_shapes["z"]) == tile_shape]
    return TileKernel(spec, kernel.params)


def data(shape, seed):
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(np.float32)


@pytest.mark.parametrize("tile_shape,shape", [((4, 256), (9, 200)), ((1, 1024), (3, 1000))])
def test_a_helper_inlined_into_a_kernel_matches_numpy(tile_shape, shape):
    x = data(shape, 1)
    z = np.full(shape, np.nan, np.float32)
    emulated("softmax_by_helper", tile_shape)(x, z)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(z, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("shape", [(4, 256), (37, 200)])
def test_helpers_with_tuples_scalars_defaults_and_nesting_match_numpy(shape):
    x = data(shape, 2)
    z = np.full(shape, np.nan, np.float32)
    mean, var = np.full((2, shape[0]), np.nan, np.float32)
    emulated("normalise_by_helpers", (4, 256))(x, 0.5, z, mean, var)
    mu = x.astype(np.float64).mean(axis=1)
    np.testing.assert_allclose(mean, mu, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(var, x.astype(np.float64).var(axis=1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(z, (x - mu[:, None]) * 0.5 + 1.0, rtol=1e-5, atol=1e-5)
