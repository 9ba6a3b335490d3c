"""SIMT patterns on a real GPU, against NumPy at ragged sizes.

Two sets: the kernels of example_kernels.patterns (run after `pip install
./example_project`), and the ported-code kernels of tests/simt_cases.py, compiled
here into a throwaway package for this GPU. Skipped without a GPU, torch or the
package. The example kernels' cases also run on the CPU emulator (``device`` cpu,
at the smaller sizes, in the default suite; see tests/emulated_packages.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
TESTS = Path(__file__).parents[1]
sys.path.insert(0, str(TESTS))
from emulated_packages import examples_for_the_emulator, on_devices  # noqa: E402

_device = {"name": "cuda"}   # the device of the running case (set by the `patterns` fixture)


@pytest.fixture
def patterns(device):
    _device["name"] = device
    if device == "cuda":
        yield pytest.importorskip("example_kernels.patterns", reason="the example project is not installed")
        return
    from buildtile.emulate import emulated

    module = examples_for_the_emulator()["patterns"]
    with emulated():
        yield module


def cuda(a: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(a)).to(_device["name"])


def host(t) -> np.ndarray:
    if t.is_cuda:
        torch.cuda.synchronize()
    return t.cpu().numpy()


@pytest.mark.parametrize("device,n", on_devices([1, 31, 255, 257, 100_003, 4_000_037]))
def test_block_sum_matches_numpy(patterns, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    blocks = (n + 255) // 256
    partial = cuda(np.full(blocks, np.nan, np.float32))
    patterns.block_sum[blocks](cuda(x), partial)
    got = host(partial)
    want = np.add.reduceat(x.astype(np.float64), np.arange(0, n, 256))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device,shape", on_devices([(1, 1), (37, 1000), (1025, 33), (2048, 2049)]))
def test_transpose_tiled_matches_numpy(patterns, shape):
    a = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out = cuda(np.full(shape[::-1], np.nan, np.float32))
    grid = ((shape[1] + 31) // 32, (shape[0] + 31) // 32)
    patterns.transpose_tiled[grid](cuda(a), out)
    np.testing.assert_array_equal(host(out), a.T)


@pytest.mark.parametrize("device,n,bins", on_devices([[1, 7], [1000, 16], [1_000_003, 257]]))
def test_histogram_matches_numpy(patterns, n, bins):
    rng = np.random.default_rng(n)
    values = rng.integers(-3, bins + 3, n).astype(np.int32)   # some out of range: ignored
    counts = cuda(np.zeros(bins, np.uint32))
    patterns.histogram[(n + 255) // 256](cuda(values), counts)
    inside = values[(values >= 0) & (values < bins)]
    np.testing.assert_array_equal(host(counts), np.bincount(inside, minlength=bins).astype(np.uint32))


@pytest.mark.parametrize("device,shape", on_devices([(1, 1), (3, 100), (257, 1000), (64, 4097)]))
def test_softmax_rows_matches_numpy(patterns, shape):
    x = (np.random.default_rng(2).standard_normal(shape) * 4).astype(np.float32)
    out = cuda(np.full(shape, np.nan, np.float32))
    patterns.softmax_rows[shape[0]](cuda(x), out)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(host(out), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("device,shape", on_devices([(3, 3, 3), (17, 33, 65), (64, 100, 130)]))
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


@pytest.mark.parametrize("device,n,blocks", on_devices([[1, 1], [1000, 3], [1_000_003, 7], [4_000_037, 264]]))
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


@pytest.mark.parametrize("n,blocks", [(1, 1), (3, 1), (1001, 2), (1_000_003, 7), (4_000_037, 264), (1 << 22, 1056)])
@pytest.mark.parametrize("offset", [0, 1, 3])
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.gpu)])   # too large for the emulator
def test_sum_total_matches_numpy_at_ragged_sizes_and_misaligned_views(patterns, device, n, blocks, offset):
    # small integers: every partial sum is exact in f32, so the total must equal NumPy's exactly;
    # x[offset:] of an aligned tensor launches the plain entry when offset is not a multiple of 4
    x = np.random.default_rng(n + offset).integers(-8, 9, n + offset).astype(np.float32)
    view = cuda(x)[offset:]
    assert (view.data_ptr() % 16 == 0) == (offset == 0)
    total = cuda(np.zeros(1, np.float32))
    patterns.sum_total[blocks](view, total)
    assert host(total)[0] == x[offset:].astype(np.float64).sum()


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.gpu)])   # too large for the emulator
def test_sum_total_adds_to_what_total_holds(patterns, device):
    x = np.arange(-500, 523, dtype=np.float32)
    total = cuda(np.array([7.0], np.float32))
    patterns.sum_total[3](cuda(x), total)
    patterns.sum_total[5](cuda(x), total)
    assert host(total)[0] == 7.0 + 2 * x.astype(np.float64).sum()


@pytest.mark.parametrize("device,n", on_devices([256, 1000, 65_536 + 17]))
def test_reverse_blocks_through_dynamic_shared_memory(patterns, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    out = cuda(np.full(n, np.nan, np.float32))
    patterns.reverse_blocks[(n + 255) // 256](cuda(x), out)
    padded = np.zeros((n + 255) // 256 * 256, np.float32)
    padded[:n] = x
    np.testing.assert_array_equal(host(out), padded.reshape(-1, 256)[:, ::-1].reshape(-1)[:n])


# ---------------------------------------------------------------- ported code (tests/simt_cases.py)

@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """tests/simt_cases.py compiled for this GPU into a throwaway package."""
    from kernel_packages import compiled_for_this_gpu

    with compiled_for_this_gpu(TESTS / "simt_cases.py", "btsimtcases", tmp_path_factory.mktemp("simt_cases")) as ops:
        yield ops


def blocks_for(n: int, block: int) -> int:
    return max(1, -(-n // block))


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["saxpy_while", "saxpy_range"])
@pytest.mark.parametrize("n,blocks", [(1, 1), (1000, 1), (100_003, 3), (1_000_003, 37)])
def test_grid_stride_loops_cover_every_element_once(cases, name, n, blocks):
    # fewer threads than elements: each thread strides over several
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = cuda(np.full(n, np.nan, np.float32))
    getattr(cases, name)[blocks](2.5, cuda(x), cuda(y), out)
    np.testing.assert_allclose(host(out), np.float32(2.5) * x + y, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 127, 129, 100_003])
def test_spelled_out_index_copies(cases, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    out = cuda(np.full(n, np.nan, np.float32))
    cases.copy_explicit[blocks_for(n, 128)](cuda(x), out)
    np.testing.assert_array_equal(host(out), x + np.float32(1))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 1), (17, 33), (300, 257)])
def test_row_major_linearisation_adds_matrices(cases, shape):
    rows, cols = shape
    rng = np.random.default_rng(rows)
    a, b = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
    c = cuda(np.full(rows * cols, np.nan, np.float32))
    cases.matadd_flat[(blocks_for(cols, 16), blocks_for(rows, 16))](
        cuda(a.ravel()), cuda(b.ravel()), c, rows, cols)
    np.testing.assert_array_equal(host(c).reshape(shape), a + b)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 1), (33, 17), (100, 301)])
def test_grid2_is_x_first(cases, shape):
    rows, cols = shape
    a = np.random.default_rng(cols).standard_normal(shape).astype(np.float32)
    out = cuda(np.full(rows * cols, np.nan, np.float32))
    cases.scale_grid2[(blocks_for(cols, 16), blocks_for(rows, 16))](cuda(a), out, 3.0)
    np.testing.assert_allclose(host(out).reshape(shape), (a.astype(np.float64) * 3.0).astype(np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 9, 17), (13, 31, 70)])
def test_three_dimensional_linearisation(cases, shape):
    nz, ny, nx = shape
    out = cuda(np.full(nz * ny * nx, -1, np.int64))
    cases.volume_index[(blocks_for(nx, 8), blocks_for(ny, 8), blocks_for(nz, 4))](out, nx, ny, nz)
    np.testing.assert_array_equal(host(out), np.arange(nz * ny * nx))


@pytest.mark.gpu
@pytest.mark.parametrize("n,bins", [(1, 3), (10_000, 17), (1_000_003, 256)])
def test_histogram_compares_i32_with_len(cases, n, bins):
    values = np.random.default_rng(n).integers(-4, bins + 4, n).astype(np.int32)
    counts = cuda(np.zeros(bins, np.uint32))
    cases.histogram_widened[blocks_for(n, 256)](cuda(values), counts)
    inside = values[(values >= 0) & (values < bins)]
    np.testing.assert_array_equal(host(counts), np.bincount(inside, minlength=bins).astype(np.uint32))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 255, 257, 10_001])
def test_integer_stored_into_float(cases, n):
    x = np.random.default_rng(n).integers(-2**20, 2**20, n).astype(np.int32)
    out = cuda(np.full(n, np.nan, np.float64))
    cases.int_to_float[blocks_for(n, 256)](cuda(x), out)
    np.testing.assert_array_equal(host(out), (x.astype(np.float32) * np.float32(0.5)).astype(np.float64))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 2, 129, 5000])
def test_device_function_returns_a_tuple_and_branches(cases, n):
    a = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    a[::7] = 0.0
    lo, hi = cuda(np.full(n, np.nan, np.float32)), cuda(np.full(n, np.nan, np.float32))
    s = cuda(np.full(n, 7, np.int32))
    cases.pairs_and_signs[blocks_for(n, 128)](cuda(a), lo, hi, s)
    nxt = np.append(a[1:], a[-1:])
    np.testing.assert_array_equal(host(lo), np.minimum(a, nxt))
    np.testing.assert_array_equal(host(hi), np.maximum(a, nxt))
    np.testing.assert_array_equal(host(s), np.sign(a).astype(np.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 1), (130, 7), (1000, 65)])
def test_device_function_takes_a_tensor(cases, shape):
    m = np.random.default_rng(shape[1]).integers(-8, 9, shape).astype(np.float32)   # exact sums
    out = cuda(np.full(shape[0], np.nan, np.float32))
    cases.row_sums[blocks_for(shape[0], 128)](cuda(m), out)
    np.testing.assert_array_equal(host(out), m.sum(axis=1))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 50, 93])
def test_tuple_assignment_swaps(cases, n):
    out = cuda(np.full(n, -1, np.int64))
    cases.fibonacci[blocks_for(n, 128)](out)
    fib = [0, 1]
    while len(fib) < n:
        fib.append(fib[-1] + fib[-2])
    np.testing.assert_array_equal(host(out), np.array(fib[:n], np.int64))
