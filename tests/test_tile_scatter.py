"""Scatters (tests/tile_scatter_cases.py) on the CPU emulator against NumPy at ragged sizes: atomic
adds from every block into tile.Atomic outputs, out-of-range and masked elements adding nothing.
The same kernels run on a GPU in tests/gpu/test_tile_scatters.py."""

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
CASES = Path(__file__).parent / "tile_scatter_cases.py"


@cache
def compiled(name: str):
    registry = backends()
    (src,) = [s for s in find_kernels(KernelModule("tile_scatter_cases", CASES), registry, ROOT) if s.name == name]
    impl = registry["tile"].impl
    return impl, impl.analyze(src, CompileOptions())


@cache
def emulated(name: str) -> TileKernel:
    impl, kernel = compiled(name)
    return TileKernel(impl.specializations(kernel)[0], kernel.params)


def rng(seed):
    return np.random.default_rng(seed)


def test_an_atomic_output_is_a_read_write_argument_of_its_own_kind():
    _, kernel = compiled("index_add")
    (acc,) = [p for p in kernel.params if p["name"] == "acc"]
    assert (acc["kind"], acc["role"], acc["rank"]) == ("tile_atomic", "inout", 1)
    assert kernel.grid_param == "z"


@pytest.mark.parametrize("n,m", [(1, 1), (1000, 10), (777, 300)])
def test_index_add_accumulates_every_block_onto_the_initial_contents(n, m):
    x = rng(1).integers(-8, 8, n).astype(np.float32)        # small integers: every order of adds is exact
    idx = rng(2).integers(-2, m + 2, n).astype(np.int32)
    z = np.full(n, np.nan, np.float32)
    acc = rng(3).integers(0, 5, m).astype(np.float32)
    want = acc.copy()
    inside = (idx >= 0) & (idx < m)
    np.add.at(want, idx[inside], x[inside])
    emulated("index_add")(x, idx, z, acc)
    np.testing.assert_array_equal(acc, want)
    np.testing.assert_array_equal(z, x * 2)


@pytest.mark.parametrize("shape,bins", [((16, 64), 8), ((37, 100), 20)])
def test_histogram_per_band_of_rows(shape, bins):
    x = rng(4).integers(-1, bins + 1, shape).astype(np.int32)   # -1 and `bins` fall outside
    z = np.zeros(shape, np.int32)
    counts = np.zeros((-(-shape[0] // 16), bins), np.int64)
    emulated("histogram_2d")(x, z, counts)
    want = np.zeros_like(counts)
    for r in range(shape[0]):
        for v in x[r]:
            if 0 <= v < bins:
                want[r // 16, v] += 1
    np.testing.assert_array_equal(counts, want)
    np.testing.assert_array_equal(z, x)
