"""The thread-index forms ported code writes, run on the CPU emulator against NumPy: CUDA C++'s
spelled-out 2-D and 3-D index, grid-stride loops over 3-D witnesses, and grid-stride loops over
copies of the index (tests/ui/pass/spelled_and_strided_indices.py). Each element is written once,
by its own thread: the emulator's writer record would report a second writer (BT0801)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from buildtile.emulate.direct import SimtKernel

CASES = Path(__file__).parent / "ui" / "pass" / "spelled_and_strided_indices.py"
RNG = np.random.default_rng(7)


def kernel(name: str) -> SimtKernel:
    return SimtKernel(CASES, name)


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 9), (5, 9, 17)])
def test_spelled_out_3d_index_covers_a_volume(shape):
    a = RNG.standard_normal(shape).astype(np.float32)
    out = np.full(shape, np.nan, np.float32)
    kernel("volume")((-(-shape[2] // 8), -(-shape[1] // 4), -(-shape[0] // 4)), (8, 4, 4), a, out)
    np.testing.assert_array_equal(out, a * 2)


@pytest.mark.parametrize("shape", [(1, 1), (17, 33), (40, 5)])
def test_spelled_out_2d_index_linearised_under_its_guard(shape):
    h, w = shape
    c = np.full(h * w, np.nan, np.float32)
    kernel("rows_flat")((-(-w // 16), -(-h // 16)), (16, 16), c, w, h)
    row, col = np.indices(shape)
    np.testing.assert_array_equal(c.reshape(shape), (row - col).astype(np.float32))


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 20, 33)])
def test_3d_grid_stride_loops_reach_every_element_once(shape):
    out = np.zeros(shape, np.float32)
    kernel("strided_volume")((2, 1, 1), (8, 8, 2), out)   # fewer threads than elements on every axis
    np.testing.assert_array_equal(out, np.ones(shape, np.float32))


@pytest.mark.parametrize("n", [1, 127, 1000])
def test_grid_stride_loops_over_copies_of_the_index(n):
    x = RNG.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    kernel("stepped_copies")(2, 128, x, out)
    np.testing.assert_array_equal(out, x * 2 + 1)


def test_a_kernel_calling_index_1d_keeps_a_spelled_y_index_plain():
    out = np.full(200, np.nan, np.float32)
    runner = kernel("explicit_1d_with_spelled_y")
    assert runner.contract["index_dims"] == 1
    runner(2, 128, out)
    np.testing.assert_array_equal(out, np.arange(200, dtype=np.float32))
