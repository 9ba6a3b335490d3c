"""SIMT memory and number kinds of example_kernels.memory on a real GPU, against NumPy at ragged
sizes: 2-D shared tiles, shared atomics, constant arrays, segmented shuffles, 8/16-bit integers
and the Philox random stream (against buildtile.random's host reference).

Run after `pip install ./example_project`; skipped without a GPU, torch or the package.
The same cases also run on the CPU emulator (``device`` cpu, at the smaller sizes, in the
default suite; see tests/emulated_packages.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from buildtile import random

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parents[1]))
from emulated_packages import examples_for_the_emulator, on_devices  # noqa: E402

SIZES = on_devices([1, 255, 257, 100_003])
_device = {"name": "cuda"}   # the device of the running case (set by the `memory` fixture)


@pytest.fixture
def memory(device):
    _device["name"] = device
    if device == "cuda":
        yield pytest.importorskip("example_kernels.memory", reason="the example project is not installed")
        return
    from buildtile.emulate import emulated

    module = examples_for_the_emulator()["memory"]
    with emulated():
        yield module


def cuda(a: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(a)).to(_device["name"])


def host(t) -> np.ndarray:
    if t.is_cuda:
        torch.cuda.synchronize()
    return t.cpu().numpy()


def blocks(n: int, block: int) -> int:
    return (n + block - 1) // block


@pytest.mark.parametrize("device,shape", on_devices([(1, 1), (17, 33), (37, 1000), (1025, 15)]))
def test_transpose_through_a_2d_shared_tile(memory, shape):
    a = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out = cuda(np.full(shape[::-1], np.nan, np.float32))
    memory.transpose_shared[(blocks(shape[1], 16), blocks(shape[0], 16))](cuda(a), out)
    np.testing.assert_array_equal(host(out), a.T)


@pytest.mark.parametrize("device,n", SIZES)
def test_block_histogram_with_shared_atomics(memory, n):
    values = np.random.default_rng(n).integers(-5, 70, n).astype(np.int32)   # some off the bins
    bins = cuda(np.zeros(64, np.uint32))
    memory.block_histogram[blocks(n, 256)](cuda(values), bins)
    inside = values[(values >= 0) & (values < 64)]
    np.testing.assert_array_equal(host(bins), np.bincount(inside, minlength=64).astype(np.uint32))


@pytest.mark.parametrize("device,n", SIZES)
def test_2d_shared_atomics_skip_points_off_either_axis(memory, n):
    rng = np.random.default_rng(n)
    xs = rng.integers(-2, 10, n).astype(np.int32)
    ys = rng.integers(-2, 10, n).astype(np.int32)
    bins = cuda(np.zeros(64, np.uint32))
    memory.grid_histogram[blocks(n, 256)](cuda(xs), cuda(ys), bins)
    on = (xs >= 0) & (xs < 8) & (ys >= 0) & (ys < 8)
    want = np.bincount(ys[on] * 8 + xs[on], minlength=64).astype(np.uint32)
    np.testing.assert_array_equal(host(bins), want)


@pytest.mark.parametrize("device,n", SIZES)
def test_polynomial_from_a_constant_array(memory, n):
    x = np.random.default_rng(n).uniform(-2, 2, n).astype(np.float32)
    y = cuda(np.full(n, np.nan, np.float32))
    memory.polynomial[blocks(n, 256)](cuda(x), y)
    want = np.polynomial.polynomial.polyval(x.astype(np.float64), memory.COEFFS)
    np.testing.assert_allclose(host(y), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device,n", SIZES)
def test_segmented_scan_with_shfl_up_width(memory, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    out = cuda(np.full(n, np.nan, np.float32))
    memory.segmented_scan[blocks(n, 128)](cuda(x), out)
    padded = np.zeros(blocks(n, 16) * 16, np.float64)
    padded[:n] = x
    want = np.cumsum(padded.reshape(-1, 16), axis=1).reshape(-1)[:n]
    np.testing.assert_allclose(host(out), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device,n", SIZES)
def test_brighten_u8_pixels_in_16_bit_arithmetic(memory, n):
    pixels = np.random.default_rng(n).integers(0, 256, n).astype(np.uint8)
    out = cuda(np.zeros(n, np.uint8))
    memory.brighten[blocks(n, 256)](cuda(pixels), out, 24, -40)
    scaled = (pixels.astype(np.uint16) * np.uint16(24)) // np.uint16(16)
    want = np.clip(scaled.astype(np.int16) - np.int16(40), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(host(out), want)


@pytest.mark.parametrize("device,n", SIZES)
def test_widen_i8_and_u16_device_arrays(memory, n):
    from buildtile.runtime import DeviceArray
    from buildtile.runtime.driver import get_driver

    rng = np.random.default_rng(n)
    a = rng.integers(-128, 128, n).astype(np.int8)
    b = rng.integers(0, 65536, n).astype(np.uint16)
    wide = DeviceArray.from_numpy(np.zeros(n, np.int32))
    low = DeviceArray.from_numpy(np.zeros(n, np.int16))
    memory.widen[blocks(n, 256)](DeviceArray.from_numpy(a), DeviceArray.from_numpy(b), wide, low)
    driver = get_driver()
    driver.synchronize(driver.context(0))
    with np.errstate(over="ignore"):
        y = (a * np.int8(3) + np.int8(1)).astype(np.int8)
    np.testing.assert_array_equal(wide.to_numpy(), y.astype(np.int32) + b.astype(np.int32))
    np.testing.assert_array_equal(low.to_numpy(), b.astype(np.int16) >> 2)


@pytest.mark.parametrize("device,n", SIZES)
@pytest.mark.parametrize("seed, offset", [(0, 0), (0x0123456789ABCDEF, 2**32 - 7), (2**64 - 1, 2**40)])
def test_random_stream_equals_the_host_reference(memory, n, seed, offset):
    uniform = cuda(np.full(n, np.nan, np.float32))
    normal = cuda(np.full(n, np.nan, np.float32))
    words = cuda(np.zeros(n, np.uint32))
    memory.random_fill[blocks(n, 256)](uniform, normal, words, seed, offset)
    i = np.arange(n, dtype=np.uint64)
    np.testing.assert_array_equal(host(uniform), random.uniform(seed, np.uint64(offset) + i))
    np.testing.assert_allclose(host(normal), random.normal(seed, np.uint64(offset) + i), rtol=2e-5, atol=2e-5)
    np.testing.assert_array_equal(host(words), random.philox(seed, i, 3, 2))
