"""Constant arrays and 8/16-bit integers in SIMT kernels: their LLVM IR run on the host, one
thread at a time, against NumPy at ragged sizes (the GPU tests run the same constructs on a device)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from buildtile.emulate.direct import SimtKernel

UI_PASS = Path(__file__).parent / "ui" / "pass"
SIZES = [1, 130, 257]

COEFFS = (1.0, 2.5, 3.0, -0.5)
WEIGHTS = (1, 4, 6, 4, 1)


def blocks(n: int, block: int) -> int:
    return (n + block - 1) // block


@pytest.mark.parametrize("n", SIZES)
def test_polynomial_reads_the_constant_array_at_run_time_indices(n):
    kernel = SimtKernel(UI_PASS / "constant_arrays.py", "polynomial")
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    kernel(blocks(n, 128), 128, x, y)
    want = np.zeros(n, np.float64)
    for c in reversed(COEFFS):
        want = want * x + c
    want += COEFFS[0] + COEFFS[-1] + (2 + 0.25)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", SIZES)
def test_one_constant_array_serves_f64_i32_and_u8_reads(n):
    kernel = SimtKernel(UI_PASS / "constant_arrays.py", "binomial_blur")
    x = np.random.default_rng(n).standard_normal(n)
    y = np.full(n, np.nan)
    taps = np.full(n, -1, np.int32)
    codes = np.zeros(n, np.uint8)
    kernel(blocks(n, 128), 128, x, y, taps, codes)
    padded = np.concatenate([np.zeros(2), x, np.zeros(2)])
    want = sum(w * padded[k:k + n] for k, w in enumerate(WEIGHTS)) / 16.0
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(taps, np.array(WEIGHTS)[np.arange(n) % 5])
    np.testing.assert_array_equal(codes, np.array(WEIGHTS, np.uint8)[np.arange(n) % 5])


@pytest.mark.parametrize("n", SIZES)
def test_u8_pixels_through_16_bit_arithmetic(n):
    kernel = SimtKernel(UI_PASS / "small_integers.py", "brighten")
    pixels = np.random.default_rng(n).integers(0, 256, n).astype(np.uint8)
    out = np.zeros(n, np.uint8)
    gain, bias = 24, -40
    kernel(blocks(n, 256), 256, pixels, out, gain, bias)
    scaled = (pixels.astype(np.uint16) * np.uint16(gain)) // np.uint16(16)
    want = np.clip(scaled.astype(np.int16) + np.int16(bias), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("n", SIZES)
def test_8_and_16_bit_values_extend_wrap_and_shift_as_numpy(n):
    kernel = SimtKernel(UI_PASS / "small_integers.py", "widen")
    rng = np.random.default_rng(n)
    a = rng.integers(-128, 128, n).astype(np.int8)
    b = rng.integers(0, 65536, n).astype(np.uint16)
    wide, low, bits = np.zeros(n, np.int32), np.zeros(n, np.int16), np.zeros(n, np.uint8)
    kernel(blocks(n, 128), 128, a, b, wide, low, bits)
    with np.errstate(over="ignore"):
        y = (a * np.int8(3) + np.int8(1)).astype(np.int8)       # wraps at 8 bits
    np.testing.assert_array_equal(wide, y.astype(np.int32) + b.astype(np.int32))
    np.testing.assert_array_equal(low, b.astype(np.int16) >> 2)  # the u16 bits as i16, arithmetic shift
    z = b.astype(np.uint8) ^ np.uint8(0xA5)
    np.testing.assert_array_equal(bits, ((z << 1) | (z >> 7)).astype(np.uint8))
