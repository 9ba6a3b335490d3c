"""Cooperative SIMT kernels of example_kernels.cooperative on a real GPU, against NumPy at ragged
sizes: simt.grid_sync() between the phases of one launch, and the refusal of a grid the device
cannot hold resident.

Run after `pip install ./example_project`; skipped without a GPU, torch or the package.
"""

from __future__ import annotations

import numpy as np
import pytest

from buildtile.errors import ContractError

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

SIZES = [1, 255, 257, 100_003]


@pytest.fixture(scope="module")
def cooperative():
    return pytest.importorskip("example_kernels.cooperative", reason="the example project is not installed")


def cuda(a: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(a)).to("cuda")


def host(t) -> np.ndarray:
    torch.cuda.synchronize()
    return t.cpu().numpy()


def want_histogram(values: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    inside = values[(values >= 0) & (values < bins)]
    counts = np.bincount(inside, minlength=bins).astype(np.uint32)
    return counts, (counts.astype(np.float64) / len(values)).astype(np.float32)


@pytest.mark.parametrize("grid", [1, 7, 64])
@pytest.mark.parametrize("n", SIZES)
def test_normalized_histogram_in_one_launch(cooperative, n, grid):
    values = np.random.default_rng(n).integers(-5, 70, n).astype(np.int32)   # some off the bins
    counts = cuda(np.zeros(61, np.uint32))
    freq = cuda(np.full(61, np.nan, np.float32))
    cooperative.normalized_histogram[grid](cuda(values), counts, freq)
    want_counts, want_freq = want_histogram(values, 61)
    np.testing.assert_array_equal(host(counts), want_counts)
    np.testing.assert_allclose(host(freq), want_freq, rtol=1e-6)


def test_repeated_launches_reuse_the_grid_barrier(cooperative):
    values = np.random.default_rng(3).integers(0, 16, 10_007).astype(np.int32)
    launch = cooperative.normalized_histogram.prepare(grid=32)
    for _ in range(5):
        counts = cuda(np.zeros(16, np.uint32))
        freq = cuda(np.zeros(16, np.float32))
        launch(cuda(values), counts, freq)
        np.testing.assert_allclose(host(freq), want_histogram(values, 16)[1], rtol=1e-6)


def test_a_grid_larger_than_the_device_holds_is_refused(cooperative):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    too_many = sms * 2048 // 256 + 1   # more blocks of 256 threads than the SMs' threads can hold
    with pytest.raises(ContractError, match="cooperative"):
        cooperative.normalized_histogram.prepare(grid=too_many)
