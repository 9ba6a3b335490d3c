"""SIMT patterns of example_kernels.patterns on a real GPU, against NumPy at ragged sizes.

Run after `pip install ./example_project`; skipped without a GPU, torch or the package.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def patterns():
    return pytest.importorskip("example_kernels.patterns", reason="the example project is not installed")


def cuda(a: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(a)).to("cuda")


def host(t) -> np.ndarray:
    torch.cuda.synchronize()
    return t.cpu().numpy()


@pytest.mark.parametrize("n", [1, 31, 255, 257, 100_003, 4_000_037])
def test_block_sum_matches_numpy(patterns, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    blocks = (n + 255) // 256
    partial = cuda(np.full(blocks, np.nan, np.float32))
    patterns.block_sum[blocks](cuda(x), partial)
    got = host(partial)
    want = np.add.reduceat(x.astype(np.float64), np.arange(0, n, 256))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(1, 1), (37, 1000), (1025, 33), (2048, 2049)])
def test_transpose_tiled_matches_numpy(patterns, shape):
    a = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out = cuda(np.full(shape[::-1], np.nan, np.float32))
    grid = ((shape[1] + 31) // 32, (shape[0] + 31) // 32)
    patterns.transpose_tiled[grid](cuda(a), out)
    np.testing.assert_array_equal(host(out), a.T)


@pytest.mark.parametrize("n,bins", [(1, 7), (1000, 16), (1_000_003, 257)])
def test_histogram_matches_numpy(patterns, n, bins):
    rng = np.random.default_rng(n)
    values = rng.integers(-3, bins + 3, n).astype(np.int32)   # some out of range: ignored
    counts = cuda(np.zeros(bins, np.uint32))
    patterns.histogram[(n + 255) // 256](cuda(values), counts)
    inside = values[(values >= 0) & (values < bins)]
    np.testing.assert_array_equal(host(counts), np.bincount(inside, minlength=bins).astype(np.uint32))


@pytest.mark.parametrize("shape", [(1, 1), (3, 100), (257, 1000), (64, 4097)])
def test_softmax_rows_matches_numpy(patterns, shape):
    x = (np.random.default_rng(2).standard_normal(shape) * 4).astype(np.float32)
    out = cuda(np.full(shape, np.nan, np.float32))
    patterns.softmax_rows[shape[0]](cuda(x), out)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(host(out), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("shape", [(3, 3, 3), (17, 33, 65), (64, 100, 130)])
def test_laplacian_3d_matches_numpy(patterns, shape):
    u = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    out = cuda(np.full(shape, np.nan, np.float32))
    nz, ny, nx = shape
    grid = ((nx + 31) // 32, (ny + 3) // 4, (nz + 1) // 2)
    patterns.laplacian_3d[grid](cuda(u), out)
    want = u.astype(np.float64).copy()
    inner = (slice(1, -1),) * 3
    want[inner] = (u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1] + u[1:-1, :-2, 1:-1] + u[1:-1, 2:, 1:-1]
                   + u[1:-1, 1:-1, :-2] + u[1:-1, 1:-1, 2:] - 6.0 * u[inner])
    np.testing.assert_allclose(host(out), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n,blocks", [(1, 1), (1000, 3), (1_000_003, 7), (4_000_037, 264)])
def test_sum_partials_adds_up_to_the_total(patterns, n, blocks):
    # small integers: every partial sum is exact in f32 (|sum| < 2**24), so compare exactly -- a
    # tolerance would let a dropped or doubled element through
    x = np.random.default_rng(n).integers(-8, 9, n).astype(np.float32)
    partial = cuda(np.full(blocks, np.nan, np.float32))
    patterns.sum_partials[blocks](cuda(x), partial)
    stride = blocks * 256      # each block's threads stride over the whole input
    padded = np.zeros(-(-n // stride) * stride)
    padded[:n] = x
    want = padded.reshape(-1, blocks, 256).sum(axis=(0, 2))
    np.testing.assert_array_equal(host(partial), want.astype(np.float32))
    assert host(partial).astype(np.float64).sum() == x.astype(np.float64).sum()


@pytest.mark.parametrize("n", [256, 1000, 65_536 + 17])
def test_reverse_blocks_through_dynamic_shared_memory(patterns, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    out = cuda(np.full(n, np.nan, np.float32))
    patterns.reverse_blocks[(n + 255) // 256](cuda(x), out)
    padded = np.zeros((n + 255) // 256 * 256, np.float32)
    padded[:n] = x
    np.testing.assert_array_equal(host(out), padded.reshape(-1, 256)[:, ::-1].reshape(-1)[:n])
