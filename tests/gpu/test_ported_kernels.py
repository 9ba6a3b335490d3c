"""Well-known kernels ported from numba-cuda's documentation and CUDA's samples (tests/ported/),
launched through the runtime and checked against NumPy at ragged sizes: on a GPU (``device``
cuda), and on the CPU emulator (``device`` cpu, at the smaller sizes, in the default suite).
tests/test_ported_builds.py builds the same modules for every default target."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
TESTS = Path(__file__).parents[1]
sys.path.insert(0, str(TESTS))
from emulated_packages import built_for_the_emulator, on_devices  # noqa: E402

from buildtile import random  # noqa: E402

PORTED = {p.stem: p for p in sorted((TESTS / "ported").glob("*.py"))}
_device = {"name": "cuda"}   # the device of the running case (set by the `ported` fixture)


@pytest.fixture(scope="module")
def ported_cpu(tmp_path_factory):
    with built_for_the_emulator(PORTED, "cpuported", tmp_path_factory.mktemp("ported_cpu")) as modules:
        yield modules


@pytest.fixture(scope="module")
def ported_cuda(tmp_path_factory):
    from kernel_packages import modules_for_this_gpu

    with modules_for_this_gpu(PORTED, "btported", tmp_path_factory.mktemp("ported_cuda")) as modules:
        yield modules


@pytest.fixture
def ported(request, device):
    """The ported kernel modules, by name, built for ``device``."""
    _device["name"] = device
    modules = request.getfixturevalue(f"ported_{device}")
    if device == "cuda":
        yield modules
        return
    from buildtile.emulate import emulated

    with emulated():
        yield modules


def dev(a: np.ndarray):
    """A copy of ``a`` on the case's device (on the CPU a tensor would share ``a``'s memory, and a
    kernel writing it in place would change the reference too)."""
    return torch.from_numpy(np.array(a, copy=True)).to(_device["name"])


def host(t) -> np.ndarray:
    if t.is_cuda:
        torch.cuda.synchronize()
    return t.cpu().numpy()


def blocks(n: int, per_block: int) -> int:
    return max(1, -(-n // per_block))


def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b in float64: the reference of an f32 kernel's dot products, whatever their order."""
    return a.astype(np.float64) @ b.astype(np.float64)


RNG = np.random.default_rng(2024)
MATMUL_SHAPES = [(1, 1, 1), (17, 33, 20), (40, 5, 37), (300, 129, 257)]


@pytest.mark.parametrize("device,shape", on_devices(MATMUL_SHAPES, cpu_max=20))
@pytest.mark.parametrize("name", ["matmul", "fast_matmul", "matmul_kernel2"])
def test_numba_matmuls_match_numpy(ported, name, shape):
    m, k, n = shape
    a, b = RNG.standard_normal((m, k)).astype(np.float32), RNG.standard_normal((k, n)).astype(np.float32)
    c = dev(np.full((m, n), np.nan, np.float32))
    # numba's matmul indexes rows with x (`i, j = cuda.grid(2)`); fast_matmul columns
    grid = (blocks(m, 16), blocks(n, 16)) if name != "fast_matmul" else (blocks(n, 16), blocks(m, 16))
    getattr(ported["matmul"], name)[grid](dev(a), dev(b), c)
    np.testing.assert_allclose(host(c), product(a, b), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("device,shape", on_devices(MATMUL_SHAPES, cpu_max=20))
@pytest.mark.parametrize("name", ["matrix_mul_cuda", "matrix_mul_checked"])
def test_cuda_samples_matrix_mul_matches_numpy(ported, name, shape):
    m, k, n = shape
    a, b = RNG.standard_normal((m, k)).astype(np.float32), RNG.standard_normal((k, n)).astype(np.float32)
    c = dev(np.full(m * n, np.nan, np.float32))
    getattr(ported["matrix_mul"], name)[blocks(n, 16), blocks(m, 16)](c, dev(a.ravel()), dev(b.ravel()), m, k, n)
    np.testing.assert_allclose(host(c).reshape(m, n), product(a, b), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("device,shape", on_devices(MATMUL_SHAPES, cpu_max=20))
def test_naive_sgemm_matches_numpy(ported, shape):
    m, k, n = shape
    a, b = RNG.standard_normal((m, k)).astype(np.float32), RNG.standard_normal((k, n)).astype(np.float32)
    c0 = RNG.standard_normal((m, n)).astype(np.float32)
    c = dev(c0.ravel())
    ported["matmul"].sgemm_naive[blocks(m, 16), blocks(n, 16)](m, n, k, 1.5, dev(a.ravel()), dev(b.ravel()), -0.5, c)
    np.testing.assert_allclose(host(c).reshape(m, n), 1.5 * product(a, b) - 0.5 * c0, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("device,n", on_devices([1, 511, 513, 3000, 1_000_003]))
def test_reduce3_sums_each_block_pair(ported, n):
    x = RNG.standard_normal(n).astype(np.float32)
    out = dev(np.full(blocks(n, 512), np.nan, np.float32))
    ported["reduction"].reduce3[blocks(n, 512)](dev(x), out, n)
    want = np.add.reduceat(x.astype(np.float64), np.arange(0, n, 512))
    np.testing.assert_allclose(host(out), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device,n", on_devices([1, 31, 3001, 1_000_003]))
def test_warp_shuffle_reduction_adds_up(ported, n):
    x = RNG.standard_normal(n).astype(np.float32)
    out = dev(np.zeros(1, np.float32))
    ported["reduction"].device_reduce_warp_atomic[3](dev(x), out)
    np.testing.assert_allclose(host(out)[0], x.astype(np.float64).sum(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("device,n", on_devices([1, 255, 256, 257, 1000, 100_001]))
def test_blelloch_prescan_is_exclusive_per_block(ported, n):
    x = RNG.integers(-5, 5, n).astype(np.float32)
    out, sums = dev(np.full(n, np.nan, np.float32)), dev(np.full(blocks(n, 256), np.nan, np.float32))
    ported["scan"].prescan[blocks(n, 256)](dev(x), out, sums)
    starts = np.arange(0, n, 256)
    want = np.concatenate([np.cumsum(np.r_[0, x[s:s + 256]])[:-1] for s in starts])
    np.testing.assert_array_equal(host(out), want)
    np.testing.assert_array_equal(host(sums), np.add.reduceat(x, starts))


@pytest.mark.parametrize("device,n", on_devices([1, 127, 128, 129, 1000, 100_001]))
def test_shuffle_scan_is_inclusive_per_block(ported, n):
    """The warps' totals are scanned by the first BLOCK // 32 lanes alone, in shuffles whose
    member mask names just them."""
    x = RNG.integers(-50, 50, n).astype(np.int32)
    data, sums = dev(x), dev(np.zeros(blocks(n, 128), np.int32))
    ported["scan"].shfl_scan[blocks(n, 128)](data, sums)
    starts = np.arange(0, n, 128)
    np.testing.assert_array_equal(host(data), np.concatenate([np.cumsum(x[s:s + 128]) for s in starts]))
    np.testing.assert_array_equal(host(sums)[:-1], np.add.reduceat(x, starts)[:-1])


@pytest.mark.parametrize("device,n", on_devices([1, 1000, 4099, 1_000_003]))
def test_histogram256_counts_bytes(ported, n):
    data = RNG.integers(0, 256, n).astype(np.uint8)
    hist = dev(np.zeros(256, np.uint32))
    ported["histogram"].histogram256[3](dev(data), hist)
    np.testing.assert_array_equal(host(hist), np.bincount(data, minlength=256))


@pytest.mark.parametrize("device,n,bins", on_devices([[1, 3], [1000, 10], [3001, 7], [1_000_003, 100]]))
def test_float_histogram_bins_like_numpy(ported, n, bins):
    x = RNG.uniform(-1.5, 2.5, n).astype(np.float32)
    hist = dev(np.zeros(bins, np.uint32))
    ported["histogram"].float_histogram[4](dev(x), -1.0, 2.0, hist)
    width = np.float32(3.0) / np.float32(bins)
    b = ((x - np.float32(-1.0)) / width).astype(np.int32)   # the kernel's arithmetic, in f32
    np.testing.assert_array_equal(host(hist), np.bincount(b[(b >= 0) & (b < bins)], minlength=bins))


@pytest.mark.parametrize("device,shape", on_devices([(1, 1), (33, 70), (64, 32), (5, 100), (1000, 1037)]))
def test_transpose_without_bank_conflicts(ported, shape):
    h, w = shape
    a = RNG.standard_normal(shape).astype(np.float32)
    out = dev(np.full(h * w, np.nan, np.float32))
    ported["transpose"].transpose_no_bank_conflicts[blocks(w, 32), blocks(h, 32)](out, dev(a.ravel()), w, h)
    np.testing.assert_array_equal(host(out).reshape(w, h), a.T)


@pytest.mark.parametrize("device,n", on_devices([1, 63, 65, 200, 4097], cpu_max=200))
def test_nbody_accelerations_match_numpy(ported, n):
    pos = RNG.standard_normal((3, n)).astype(np.float32)
    mass = RNG.uniform(0.5, 1.5, n).astype(np.float32)
    acc = [dev(np.full(n, np.nan, np.float32)) for _ in range(3)]
    ported["nbody"].integrate_forces[blocks(n, 64)](*(dev(p) for p in pos), dev(mass), *acc)
    r = pos.astype(np.float64)[:, None, :] - pos.astype(np.float64)[:, :, None]   # r[:, i, j] = x_j - x_i
    terms = r * (mass * (np.sum(r * r, axis=0) + 0.01) ** -1.5)[None]
    # an f32 sum of n terms is as good as the terms' magnitudes, not their (cancelling) total
    scale = np.sum(np.abs(terms), axis=2)
    for got, want, size in zip(acc, np.sum(terms, axis=2), scale):
        assert np.all(np.abs(host(got) - want) <= 1e-4 * size + 1e-6)


def _mandel(x: float, y: float, iters: int) -> int:
    c, z = complex(x, y), 0j
    for i in range(iters):
        z = z * z + c
        if z.real * z.real + z.imag * z.imag >= 4:
            return i
    return iters


@pytest.mark.parametrize("device,shape", on_devices([(1, 1), (13, 37), (40, 23), (200, 301)], cpu_max=1000))
@pytest.mark.parametrize("name", ["mandel_kernel", "mandel_grid2"])
def test_mandelbrot_covers_the_image_with_2d_grid_stride_loops(ported, name, shape):
    h, w = shape
    image = dev(np.zeros(shape, np.uint8))
    getattr(ported["mandelbrot"], name)[2, 2](-2.0, 1.0, -1.0, 1.0, image, 20)   # fewer threads than pixels
    px, py = 3.0 / w, 2.0 / h
    want = [[_mandel(-2.0 + x * px, -1.0 + y * py, 20) for x in range(w)] for y in range(h)]
    np.testing.assert_array_equal(host(image), np.array(want, np.uint8))


@pytest.mark.parametrize("device,n", on_devices([1, 100, 1001, 100_003]))
def test_black_scholes_matches_the_closed_form(ported, n):
    s, x, t = (RNG.uniform(lo, hi, n).astype(np.float32) for lo, hi in ((5, 30), (1, 100), (0.25, 10)))
    call, put = dev(np.full(n, np.nan, np.float32)), dev(np.full(n, np.nan, np.float32))
    r, v = 0.02, 0.30
    ported["black_scholes"].black_scholes_gpu[3](call, put, dev(s), dev(x), dev(t), r, v, n)
    S, X, T = (a.astype(np.float64) for a in (s, x, t))
    cnd = np.vectorize(lambda d: 0.5 * (1 + math.erf(d / math.sqrt(2))))
    d1 = (np.log(S / X) + (r + 0.5 * v * v) * T) / (v * np.sqrt(T))
    d2 = d1 - v * np.sqrt(T)
    np.testing.assert_allclose(host(call), S * cnd(d1) - X * np.exp(-r * T) * cnd(d2), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(host(put), X * np.exp(-r * T) * cnd(-d2) - S * cnd(-d1), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("device,shape", on_devices([(1, 1), (9, 130), (70, 21), (513, 1030)], cpu_max=2000))
def test_separable_convolution_matches_numpy(ported, shape):
    h, w = shape
    radius = 8
    src = RNG.standard_normal(shape).astype(np.float32)
    taps = RNG.standard_normal(2 * radius + 1).astype(np.float32)
    pad = np.pad(src.astype(np.float64), radius)
    rows = sum(taps[radius - j] * pad[radius:radius + h, radius + j:radius + j + w] for j in range(-radius, radius + 1))
    cols = sum(taps[radius - j] * pad[radius + j:radius + j + h, radius:radius + w] for j in range(-radius, radius + 1))
    conv = ported["convolution"]
    dst = dev(np.full(h * w, np.nan, np.float32))
    conv.convolution_rows[blocks(w, 128), blocks(h, 4)](dst, dev(src.ravel()), dev(taps), w, h)
    np.testing.assert_allclose(host(dst).reshape(shape), rows, rtol=1e-4, atol=1e-4)
    dst = dev(np.full(h * w, np.nan, np.float32))
    conv.convolution_columns[blocks(w, 16), blocks(h, 64)](dst, dev(src.ravel()), dev(taps), w, h)
    np.testing.assert_allclose(host(dst).reshape(shape), cols, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device,n,ascending", on_devices([[1024, 1], [2048, 0], [1024 * 300, 1]], cpu_max=2048))
def test_bitonic_sort_shared_sorts_each_block(ported, n, ascending):
    keys = RNG.integers(0, 1000, n).astype(np.uint32)   # repeated keys: the values must follow theirs
    vals = np.arange(n, dtype=np.uint32)
    dst_k, dst_v = dev(np.zeros(n, np.uint32)), dev(np.zeros(n, np.uint32))
    ported["bitonic"].bitonic_sort_shared[n // 1024](dst_k, dst_v, dev(keys), dev(vals), ascending)
    got_k, got_v = host(dst_k).reshape(-1, 1024), host(dst_v)
    want = np.sort(keys.reshape(-1, 1024), axis=1)
    np.testing.assert_array_equal(got_k, want if ascending else want[:, ::-1])
    np.testing.assert_array_equal(keys[got_v].reshape(-1, 1024), got_k)


@pytest.mark.parametrize("device,n", on_devices([1, 2, 64, 256, 1 << 16], cpu_max=256))
def test_bitonic_network_of_global_steps_sorts(ported, n):
    a = RNG.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    out = dev(a)
    step = ported["bitonic"].bitonic_step.prepare(blocks(n, 256))
    k = 2
    while k <= n:
        j = k // 2
        while j > 0:
            step(out, j, k)
            j //= 2
        k *= 2
    np.testing.assert_array_equal(host(out), np.sort(a))


@pytest.mark.parametrize("device,threads,iterations", on_devices([[64, 1], [128, 50], [4096, 100]], cpu_max=128))
def test_monte_carlo_pi_draws_the_reference_stream(ported, threads, iterations):
    out = dev(np.zeros(threads, np.float32))
    ported["monte_carlo_pi"].compute_pi[threads // 64](1234, iterations, out)
    t = np.arange(threads, dtype=np.uint64)[:, None]
    i = np.arange(iterations, dtype=np.uint64)[None, :]
    draw = t * np.uint64(2 * iterations) + np.uint64(2) * i
    x, y = random.uniform(1234, draw), random.uniform(1234, draw + np.uint64(1))
    inside = (x * x + y * y <= 1.0).sum(axis=1).astype(np.float32)
    want = np.float32(4.0) * inside / np.float32(iterations)   # the kernel's f32 arithmetic
    np.testing.assert_array_equal(host(out), want)
    if threads * iterations >= 10_000:
        assert abs(float(host(out).mean()) - math.pi) < 0.05


@pytest.mark.parametrize("device,shape", on_devices([(1, 1), (5, 33), (9, 100), (1000, 1027)], cpu_max=1000))
def test_warp_per_row_softmax_matches_numpy(ported, shape):
    x = RNG.standard_normal(shape).astype(np.float32) * 4
    out = dev(np.full(shape, np.nan, np.float32))
    ported["softmax"].softmax_warp[blocks(shape[0], 4)](dev(x), out)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(host(out), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device,n", on_devices([1, 5, 127, 130, 1000, 100_003]))
def test_shared_memory_stencil_1d(ported, n):
    a = RNG.integers(-100, 100, n).astype(np.int32)
    out = dev(np.zeros(n, np.int32))
    ported["stencil"].stencil_1d[blocks(n, 128)](dev(a), out)
    padded = np.pad(a, 3)
    np.testing.assert_array_equal(host(out), sum(padded[3 + d:3 + d + n] for d in range(-3, 4)))


@pytest.mark.parametrize("device,shape", on_devices([(1, 1), (3, 40), (33, 17), (1000, 999)]))
def test_jacobi_step_matches_numpy(ported, shape):
    u = RNG.standard_normal(shape).astype(np.float32)
    out = dev(np.full(shape, np.nan, np.float32))
    ported["stencil"].jacobi_step[blocks(shape[1], 16), blocks(shape[0], 16)](dev(u), out, 0.2)
    want = u.copy()
    if min(shape) > 2:
        inner = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]
        want[1:-1, 1:-1] = u[1:-1, 1:-1] + np.float32(0.2) * inner
    np.testing.assert_allclose(host(out), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device,shape", on_devices([(1, 1, 1), (9, 5, 6), (100, 33, 65)], cpu_max=300))
def test_numba_grid3_indexing_is_x_first(ported, shape):
    a = RNG.standard_normal(shape).astype(np.float32)
    out = dev(np.full(shape, np.nan, np.float32))
    grid = (blocks(shape[0], 8), blocks(shape[1], 4), blocks(shape[2], 4))
    ported["stencil"].scale_3d[grid](dev(a), out, 3.0)
    x, y, z = np.indices(shape)
    # the GPU may fuse a * 3 + offset into one rounding (an FMA): up to one rounding of a * 3 apart
    np.testing.assert_allclose(host(out), a * 3 + (x * 100 + y * 10 + z), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.gpu), "cpu"])
def test_requires_naming_module_constants_refuse_before_launch(ported):
    from buildtile.errors import ContractError

    with pytest.raises(ContractError) as info:
        ported["scan"].shfl_scan[3](dev(np.zeros(300, np.int32)), dev(np.zeros(2, np.int32)))
    assert info.value.code == "BT0600" and "len(partial_sums) * BLOCK >= len(data)" in str(info.value)
    keys = [dev(np.zeros(1000, np.uint32)) for _ in range(4)]
    with pytest.raises(ContractError) as info:
        ported["bitonic"].bitonic_sort_shared[1](*keys, 1)
    assert "len(d_dst_key) % SHARED_SIZE_LIMIT == 0" in str(info.value) and "1000" in str(info.value)
