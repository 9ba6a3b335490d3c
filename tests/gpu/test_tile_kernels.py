"""Compiled Tile kernels on a real GPU, against NumPy at ragged sizes.

Two sets: the example kernels of example_kernels.tiles (installed with the
example project, as tests/gpu/run.sh does), and the one-feature kernels of
tests/tile_cases.py, compiled here into a throwaway package for this GPU.
The example kernels' cases also run on the CPU emulator (``device`` cpu, at
the smaller sizes, in the default suite; see tests/emulated_packages.py), and
tests/test_tile_emulated.py runs both sets' kernels from source.
Launches go through the Tile host: ``kernel(args..., tile.partition(out,
tile_shape)).sync_on(stream)``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from buildtile import tile

torch = pytest.importorskip("torch")
TESTS = Path(__file__).parents[1]
sys.path.insert(0, str(TESTS))
from emulated_packages import examples_for_the_emulator, on_devices  # noqa: E402

_device = {"name": "cuda"}   # the device of the running case (set by the `tiles` fixture)


@pytest.fixture
def tiles(device):
    _device["name"] = device
    if device == "cuda":
        if not torch.cuda.is_available():
            pytest.skip("PyTorch has no CUDA")
        yield pytest.importorskip("example_kernels.tiles", reason="the example project is not installed")
        return
    from buildtile.emulate import emulated

    module = examples_for_the_emulator()["tiles"]
    with emulated():
        yield module


def cuda(a: np.ndarray, dtype=None):
    t = torch.from_numpy(np.ascontiguousarray(a)).to(_device["name"])
    return t if dtype is None else t.to(dtype)


def nans(shape, dtype=torch.float32):
    return torch.full((shape,) if isinstance(shape, int) else shape, float("nan"), dtype=dtype,
                      device=_device["name"])


def run(kernel, *args):
    """Launch on a fresh stream, wait for it, return the arrays of the launch's arguments."""
    if _device["name"] == "cpu":
        return [getattr(h, "array", h) for h in kernel(*args).sync_on(0)]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    handles = kernel(*args).sync_on(stream)
    stream.synchronize()
    return [getattr(h, "array", h) for h in handles]


def host(t) -> np.ndarray:
    return t.float().cpu().numpy() if t.dtype == torch.bfloat16 else t.cpu().numpy()


def rand(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


# ---------------------------------------------------------------- the example kernels


@pytest.mark.parametrize("tile_shape", [1024, 4096])
@pytest.mark.parametrize("device,n", on_devices([1, 1000, 4096, 100_003, 4_000_037]))
def test_add_matches_numpy(tiles, tile_shape, n):
    x, y = rand(n, 1), rand(n, 2)
    *_, z = run(tiles.add, cuda(x), cuda(y), tile.partition(nans(n), [tile_shape]))
    np.testing.assert_array_equal(host(z), x + y)


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.gpu), "cpu"])
def test_add_reads_strided_views(tiles, device):
    base = cuda(rand(20_001, 3))
    x, y = base[::2], base[1:10_002]          # a stride of 2; a pointer 4 bytes past alignment
    *_, z = run(tiles.add, x, y, tile.partition(nans(10_001), [1024]))
    np.testing.assert_array_equal(host(z), host(x) + host(y))


TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("n", [1, 1000, 100_003])
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.gpu), "cpu"])
def test_generic_add_matches_torch_in_each_dtype(tiles, device, dtype, n):
    """The specialization compiled for the arguments' dtype, with the tile shape the runtime picks."""
    x, y = cuda(rand(n, 21), TORCH_DTYPES[dtype]), cuda(rand(n, 22), TORCH_DTYPES[dtype])
    *_, z = run(tiles.add, x, y, tile.partition(nans(n, TORCH_DTYPES[dtype])))
    np.testing.assert_array_equal(host(z), host(x + y))   # torch rounds x + y once, as the kernel does


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("n", [3, 5000])
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.gpu), "cpu"])
def test_generic_axpby_matches_numpy(tiles, device, dtype, n):
    x, y = cuda(rand(n, 23), TORCH_DTYPES[dtype]), cuda(rand(n, 24), TORCH_DTYPES[dtype])
    *_, z = run(tiles.axpby, x, y, 1.5, -0.25, tile.partition(nans(n, TORCH_DTYPES[dtype]), [1024]))
    want = torch.from_numpy(np.float32(1.5) * host(x).astype(np.float32)
                            + np.float32(-0.25) * host(y).astype(np.float32)).to(TORCH_DTYPES[dtype])
    np.testing.assert_allclose(host(z).astype(np.float32), host(want).astype(np.float32), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.gpu), "cpu"])
def test_generic_add_refuses_a_dtype_nobody_compiled(tiles, device):
    from buildtile.errors import TypeMismatchError

    x = torch.zeros(10, dtype=torch.float64, device=_device["name"])
    with pytest.raises(TypeMismatchError, match="compiled for T = f32; T = f16; T = bf16"):
        tiles.add(x, x.clone(), tile.partition(torch.zeros_like(x), [1024]))


@pytest.mark.parametrize("device,shape", on_devices([(1, 1), (5, 200), (7, 1000), (16384 // 64, 1024), (3, 4099)],
                                                    cpu_max=7000))   # the two largest on the GPU only
def test_softmax_on_the_tile_shape_the_runtime_picks(tiles, shape):
    x = rand(shape, 25, scale=4.0)
    *_, z = run(tiles.softmax, cuda(x), tile.partition(nans(shape)))
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(host(z), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("tile_shape", [[64, 64], [16, 256]])
@pytest.mark.parametrize("device,shape", on_devices([(1, 1), (37, 1000), (1025, 33), (300, 513)]))
def test_scale_bias_matches_numpy(tiles, tile_shape, shape):
    x, s, b = rand(shape, 4), rand(shape[1], 5), rand(shape[1], 6)
    *_, z = run(tiles.scale_bias, cuda(x), cuda(s), cuda(b), tile.partition(nans(shape), tile_shape))
    np.testing.assert_allclose(host(z), x * s + b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device,shape,tile_shape", on_devices([
    [(1, 1), [1, 1024]], [(257, 1000), [1, 1024]], [(64, 4096), [1, 4096]], [(3, 2049), [1, 4096]],
    [(1023, 200), [4, 256]], [(33, 5000), [1, 1024]], [(9, 1000), [4, 256]]]))   # rows wider than a tile
def test_softmax_matches_numpy(tiles, tile_shape, shape):
    x = rand(shape, 7, scale=4)
    _, z = run(tiles.softmax, cuda(x), tile.partition(nans(shape), tile_shape))
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(host(z), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("device,shape,tile_shape", on_devices([
    [(513, 1000), [1, 1024]], [(2, 1024), [1, 1024]], [(1001, 256), [4, 256]], [(5, 3), [4, 256]],
    [(7, 4000), [1, 1024]], [(10, 1000), [4, 256]]]))   # rows wider than a tile
def test_layernorm_matches_numpy(tiles, tile_shape, shape):
    x, w, b = rand(shape, 8), rand(shape[1], 9), rand(shape[1], 10)
    *_, z = run(tiles.layernorm, cuda(x), cuda(w), cuda(b), 1e-5, tile.partition(nans(shape), tile_shape))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    want = (x64 - mean) / np.sqrt(((x64 - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(host(z), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("tile_shape", [64, 16])
@pytest.mark.parametrize("device,shape", on_devices([(1, 1), (37, 1000), (1025, 33), (100, 4099)]))
def test_row_sum_matches_numpy(tiles, tile_shape, shape):
    x = rand(shape, 11)
    _, z = run(tiles.row_sum, cuda(x), tile.partition(nans(shape[0]), [tile_shape]))
    np.testing.assert_allclose(host(z), x.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-4)


MATMUL_SHAPES = [(1, 1, 1), (70, 50, 45), (130, 136, 104), (1000, 777, 333), (257, 1031, 1024), (512, 512, 512)]


@pytest.mark.parametrize("tile_shape", [[128, 256], [128, 128], [64, 64]])
@pytest.mark.parametrize("device,m,n,k", on_devices([list(s) for s in MATMUL_SHAPES], cpu_max=70))
@pytest.mark.parametrize("name,dtype", [("matmul_f16", torch.float16), ("matmul_bf16", torch.bfloat16)])
def test_matmul_matches_numpy(tiles, name, dtype, tile_shape, m, n, k):
    a, b = cuda(rand((m, k), 12), dtype), cuda(rand((k, n), 13), dtype)
    want = host(a).astype(np.float64) @ host(b).astype(np.float64)     # on the rounded inputs
    *_, c = run(getattr(tiles, name), a, b, tile.partition(nans((m, n), dtype), tile_shape))
    eps = 2 ** -8 if dtype == torch.bfloat16 else 2 ** -11           # the output's rounding
    np.testing.assert_allclose(host(c), want, rtol=2 * eps, atol=2 * eps * math.sqrt(k))


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.gpu), "cpu"])
def test_matmul_reads_a_transposed_operand(tiles, device):
    a = cuda(rand((300, 200), 14), torch.float16)
    b = cuda(rand((150, 200), 15), torch.float16).t()                  # column-major (200, 150)
    *_, c = run(tiles.matmul_f16, a, b, tile.partition(nans((300, 150), torch.float16), [64, 64]))
    want = host(a).astype(np.float64) @ host(b).astype(np.float64)
    np.testing.assert_allclose(host(c), want, rtol=2 ** -10, atol=2 ** -10 * math.sqrt(200))


# ---------------------------------------------------------------- one feature each (tests/tile_cases.py)

@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """tests/tile_cases.py compiled for this GPU into a throwaway package."""
    from kernel_packages import compiled_for_this_gpu

    with compiled_for_this_gpu(TESTS / "tile_cases.py", "bttilecases", tmp_path_factory.mktemp("tile_cases")) as ops:
        yield ops


@pytest.mark.gpu
def test_where_with_a_scalar_parameter(cases):
    x = rand(10_001, 20)
    *_, z = run(cases.relu_scaled, cuda(x), 0.5, tile.partition(nans(10_001), [256]))
    np.testing.assert_array_equal(host(z), np.where(x > 0, x * np.float32(0.5), 0))


@pytest.mark.gpu
def test_f16_arithmetic_rounds_like_numpy(cases):
    x = rand(5000, 21).astype(np.float16)
    _, z = run(cases.half_affine, cuda(x), tile.partition(nans(5000, torch.float16), [512]))
    np.testing.assert_array_equal(host(z), x * np.float16(2) + np.float16(1))


@pytest.mark.gpu
def test_integer_tiles_and_arange(cases):
    (z,) = run(cases.index_pattern, tile.partition(torch.full((3001,), -1, dtype=torch.int32, device="cuda"), [128]))
    idx = np.arange(3001)
    np.testing.assert_array_equal(host(z), idx * 3 % 7 + idx // 5 + 24)   # 24 tiles of 128


@pytest.mark.gpu
def test_transpose(cases):
    x = rand((300, 170), 22)
    _, z = run(cases.transpose, cuda(x), tile.partition(nans((170, 300)), [32, 64]))
    np.testing.assert_array_equal(host(z), x.T)


@pytest.mark.gpu
def test_reshape(cases):
    x = rand((100, 64), 23)
    _, z = run(cases.flatten, cuda(x), tile.partition(nans(6400), [1024]))
    np.testing.assert_array_equal(host(z), x.reshape(-1) + np.float32(0.5))


@pytest.mark.gpu
def test_three_dimensional_tiles(cases):
    x, y = rand((5, 19, 70), 24), rand((5, 19, 70), 25)
    *_, z = run(cases.add3d, cuda(x), cuda(y), tile.partition(nans((5, 19, 70)), [2, 8, 32]))
    np.testing.assert_array_equal(host(z), x - y)


@pytest.mark.gpu
def test_reduction_across_warps_in_a_loop(cases):
    x = rand((1000, 300), 26)
    _, z = run(cases.col_sum, cuda(x), tile.partition(nans(300), [64]))
    np.testing.assert_allclose(host(z), x.astype(np.float64).sum(axis=0), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("beta", [0.0, 2.0])
def test_math_and_scalar_branches(cases, beta):
    x = rand(3000, 27)
    *_, z = run(cases.smooth, cuda(x), beta, tile.partition(nans(3000), [256]))
    want = 1 / (1 + np.exp(-x.astype(np.float64))) + np.tanh(x) * np.exp(-np.abs(x)) + beta
    np.testing.assert_allclose(host(z), want, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_mma_of_computed_operands(cases):
    a = rand((300, 75), 28)
    b = cuda(rand((75, 100), 29), torch.bfloat16)
    *_, c = run(cases.matmul_registers, cuda(a), b, tile.partition(nans((300, 100)), [64, 32]))
    a16 = host(cuda(a, torch.bfloat16)).astype(np.float64)
    np.testing.assert_allclose(host(c), a16 @ host(b).astype(np.float64) * 0.5, rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_mma_reads_both_operands_transposed_from_its_pipeline(cases):
    a = cuda(rand((300, 200), 30), torch.float16)       # K x M
    b = cuda(rand((100, 300), 31), torch.float16)       # N x K
    *_, c = run(cases.matmul_transposed_operands, a, b, tile.partition(nans((200, 100)), [64, 32]))
    want = host(a).astype(np.float64).T @ host(b).astype(np.float64).T
    np.testing.assert_allclose(host(c), want, rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
def test_chained_mma_feeds_its_result_from_registers(cases):
    a = cuda(rand((200, 32), 32), torch.float16)
    b = cuda(rand((32, 300), 33), torch.float16)
    d = cuda(rand((300, 100), 34), torch.float16)
    *_, c = run(cases.chained_mma, a, b, d, tile.partition(nans((200, 100)), [64, 32]))
    h = np.maximum(host(a).astype(np.float64) @ host(b), 0).astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(host(c), h @ host(d).astype(np.float64), rtol=1e-3, atol=2e-2)
