"""Complex numbers in SIMT kernels, run on the host (the CPU emulator) against NumPy at
ragged sizes: arithmetic, conjugates, parts, abs, exp, sqrt and log, complex64 and complex128
arrays read and written interleaved as NumPy lays them out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from buildtile.emulate.direct import SimtKernel

UI_PASS = Path(__file__).parent / "ui" / "pass"


def random_complex(n: int, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)


@pytest.fixture(scope="module")
def arithmetic():
    return SimtKernel(UI_PASS / "complex_numbers.py", "arithmetic")


@pytest.fixture(scope="module")
def functions():
    return SimtKernel(UI_PASS / "complex_numbers.py", "functions")


@pytest.mark.parametrize("n", [1, 127, 129, 300])
def test_complex64_arithmetic_matches_numpy(arithmetic, n):
    a, b = random_complex(n, np.complex64, n), random_complex(n, np.complex64, n + 1)
    out = np.full(n, np.nan, np.complex64)
    size = np.full(n, np.nan, np.float32)
    arithmetic(-(-n // 128), 128, a, b, out, size)
    z = a * b + a / (b + np.complex64(1)) - np.complex64(2) * np.conj(a)
    turn = np.complex64(complex(np.cos(np.float32(0.25 * 2 * np.pi)), np.sin(np.float32(0.25 * 2 * np.pi))))
    np.testing.assert_allclose(out, -(z * turn), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(size, np.abs(a) + a.real - a.imag + 1, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [1, 127, 129, 300])
def test_complex128_functions_match_numpy(functions, n):
    z = random_complex(n, np.complex128, n)
    z[0] = 0j if n > 1 else z[0]                    # the square root of zero is zero
    if n > 2:
        z[1], z[2] = -4 + 0j, -4 - 0j               # the branch cut: sqrt(-4) is 2i, and -2i below it
    out = np.full(n, np.nan, np.complex128)
    parts = np.full(n, np.nan, np.float64)
    functions(-(-n // 128), 128, z, out, parts)
    np.testing.assert_allclose(out, np.exp(z) + np.sqrt(z) + np.log(z + 3), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(parts, np.full(n, 1.0 + n))

