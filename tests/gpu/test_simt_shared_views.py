"""Device functions over shared-memory views (``SharedArray[T]``, ``SharedArray[T, 2]``) on a real
GPU, against NumPy at ragged sizes: tests/ui/pass/device_functions_shared_views.py, compiled for
this GPU (a block tree sum, a 2-D tile's row maximum returned as a tuple from two places, and
shared atomics made in a device function).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

KERNELS = Path(__file__).parent.parent / "ui" / "pass" / "device_functions_shared_views.py"
BLOCK = 128


@pytest.fixture(scope="module")
def views(tmp_path_factory):
    from kernel_packages import compiled_for_this_gpu

    with compiled_for_this_gpu(KERNELS, "btsharedviews", tmp_path_factory.mktemp("shared_views")) as ops:
        yield ops


def cuda(a: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(a)).to("cuda")


def host(t) -> np.ndarray:
    torch.cuda.synchronize()
    return t.cpu().numpy()


@pytest.mark.parametrize("n", [1, 127, 129, 100_003])
def test_device_functions_read_and_write_the_kernels_shared_arrays(views, n):
    blocks = -(-n // BLOCK)
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    padded = np.zeros(blocks * BLOCK, np.float32)
    padded[:n] = x
    sums = cuda(np.full(blocks, np.nan, np.float32))
    best = cuda(np.full(n, np.nan, np.float32))
    col = cuda(np.full(n, -1, np.int64))
    counts = cuda(np.zeros(blocks * 8, np.uint32))
    views.k[blocks](cuda(x), sums, best, col, counts)
    np.testing.assert_allclose(host(sums), padded.reshape(blocks, BLOCK).astype(np.float64).sum(axis=1),
                               rtol=1e-4, atol=1e-4)
    groups = padded.reshape(-1, 4)
    np.testing.assert_array_equal(host(best), np.repeat(groups.max(axis=1), 4)[:n])
    np.testing.assert_array_equal(host(col), np.repeat(groups.argmax(axis=1), 4)[:n])
    np.testing.assert_array_equal(host(counts), np.full(blocks * 8, BLOCK // 8, np.uint32))
