"""Gathers (tests/tile_gather_cases.py) on the CPU emulator against NumPy at ragged sizes, indices
outside the array reading the padding; the same kernels run on a GPU in tests/gpu/test_tile_gathers.py."""

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
CASES = Path(__file__).parent / "tile_gather_cases.py"


@cache
def emulated(name: str) -> TileKernel:
    registry = backends()
    (src,) = [s for s in find_kernels(KernelModule("tile_gather_cases", CASES), registry, ROOT) if s.name == name]
    impl = registry["tile"].impl
    kernel = impl.analyze(src, CompileOptions())
    return TileKernel(impl.specializations(kernel)[0], kernel.params)


def rng(seed):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("n,m", [(1, 1), (1000, 300), (513, 2000)])
def test_take_reads_the_padding_outside_the_array(n, m):
    x = rng(1).standard_normal(m).astype(np.float32)
    idx = rng(2).integers(-5, m + 5, n).astype(np.int32)      # some indices outside x, on both sides
    z = np.full(n, np.nan, np.float32)
    emulated("take")(x, idx, z)
    inside = (idx >= 0) & (idx < m)
    np.testing.assert_array_equal(z, np.where(inside, x[np.clip(idx, 0, m - 1)], -1.0))


@pytest.mark.parametrize("vocab,width,n", [(50, 32, 16), (7, 45, 37)])
def test_embedding_rows_with_a_mask(vocab, width, n):
    table = rng(3).standard_normal((vocab, width)).astype(np.float32)
    ids = rng(4).integers(0, vocab, n).astype(np.int64)
    ids[::5] = vocab + 3                                       # out of range: rows of padding
    z = np.full((n, width), np.nan, np.float32)
    emulated("embedding")(table, ids, z)
    want = np.where((ids < vocab)[:, None], table[np.minimum(ids, vocab - 1)], 0.0)
    np.testing.assert_array_equal(z, want)


@pytest.mark.parametrize("n", [1, 128, 1001])
def test_reverse_from_computed_indices(n):
    x = rng(5).standard_normal(n).astype(np.float32)
    z = np.full(n, np.nan, np.float32)
    emulated("reverse")(x, z)
    np.testing.assert_array_equal(z, x[::-1])
