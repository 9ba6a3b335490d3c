"""Complex SIMT kernels on a real GPU, against NumPy at ragged sizes: example_kernels.numbers and
tests/ui/pass/complex_numbers.py (compiled for this GPU), reading and writing NumPy-layout
complex64/complex128 tensors through PyTorch.

Run after `pip install ./example_project`; skipped without a GPU, torch or the package.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

SIZES = [1, 255, 257, 100_003]
CASES = Path(__file__).parent.parent / "ui" / "pass" / "complex_numbers.py"


@pytest.fixture(scope="module")
def numbers():
    return pytest.importorskip("example_kernels.numbers", reason="the example project is not installed")


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    from kernel_packages import compiled_for_this_gpu

    with compiled_for_this_gpu(CASES, "btcomplex", tmp_path_factory.mktemp("complex")) as ops:
        yield ops


def cuda(a: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(a)).to("cuda")


def host(t) -> np.ndarray:
    torch.cuda.synchronize()
    return t.cpu().numpy()


def random_complex(n: int, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)


@pytest.mark.parametrize("n", SIZES)
def test_rotate_phase(numbers, n):
    z = random_complex(n, np.complex64, n)
    theta = np.random.default_rng(n + 1).uniform(-np.pi, np.pi, n).astype(np.float32)
    out = cuda(np.full(n, np.nan, np.complex64))
    magnitude = cuda(np.full(n, np.nan, np.float32))
    numbers.rotate_phase[-(-n // 256)](cuda(z), cuda(theta), out, magnitude)
    np.testing.assert_allclose(host(out), z * np.exp(1j * theta.astype(np.float64)), rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(host(magnitude), np.abs(z), rtol=1e-6)


@pytest.mark.parametrize("n", SIZES)
def test_complex64_arithmetic(cases, n):
    a, b = random_complex(n, np.complex64, n), random_complex(n, np.complex64, n + 1)
    out = cuda(np.full(n, np.nan, np.complex64))
    size = cuda(np.full(n, np.nan, np.float32))
    cases.arithmetic[-(-n // 128)](cuda(a), cuda(b), out, size)
    z = a * b + a / (b + np.complex64(1)) - np.complex64(2) * np.conj(a)
    np.testing.assert_allclose(host(out), -(z * 1j), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(host(size), np.abs(a) + a.real - a.imag + 1, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", SIZES)
def test_complex128_functions(cases, n):
    z = random_complex(n, np.complex128, n)
    out = cuda(np.full(n, np.nan, np.complex128))
    parts = cuda(np.full(n, np.nan, np.float64))
    cases.functions[-(-n // 128)](cuda(z), out, parts)
    np.testing.assert_allclose(host(out), np.exp(z) + np.sqrt(z) + np.log(z + 3), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(host(parts), np.full(n, 1.0 + n))
