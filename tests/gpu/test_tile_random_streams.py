"""tile.rand / tile.randn (tests/tile_random_cases.py) on a real GPU: the stream of buildtile.random's
NumPy reference at ragged sizes; the same kernels run on the CPU emulator in tests/test_tile_random.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from buildtile import random, tile

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
TESTS = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    from kernel_packages import compiled_for_this_gpu

    with compiled_for_this_gpu(TESTS / "tile_random_cases.py", "bttilerand", tmp_path_factory.mktemp("rand")) as ops:
        yield ops


def nans(*shape):
    return torch.full(shape, float("nan"), dtype=torch.float32, device="cuda")


def launch(kernel, *args):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    kernel(*args).sync_on(stream)
    stream.synchronize()


@pytest.mark.parametrize("tile_shape", [[256], [1024]])
@pytest.mark.parametrize("n,seed", [(1, 0), (100_003, 42), (1_000_001, -7), (70_000, 2**40 + 3)])
def test_rand_is_the_uniform_stream_of_the_reference(cases, tile_shape, n, seed):
    z = nans(n)
    launch(cases.uniform_1d, seed, tile.partition(z, tile_shape))
    np.testing.assert_array_equal(z.cpu().numpy(), random.uniform(seed, np.arange(n, dtype=np.int64)))


@pytest.mark.parametrize("shape,seed,base", [((16, 64), 3, 0), ((1001, 333), -1, 2**33)])
def test_randn_is_the_normal_stream_of_the_reference(cases, shape, seed, base):
    z = nans(*shape)
    launch(cases.normal_2d, seed, base, tile.partition(z, [16, 64]))
    offsets = base + np.arange(shape[0] * shape[1], dtype=np.int64).reshape(shape)
    np.testing.assert_allclose(z.cpu().numpy(), random.normal(np.int32(seed), offsets), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [512, 100_001])
def test_dropout_keeps_what_the_reference_keeps(cases, n):
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    z = nans(n)
    launch(cases.dropout, torch.from_numpy(x).cuda(), 0.25, 11, tile.partition(z, [512]))
    keep = random.uniform(11, np.arange(n, dtype=np.int32)) >= np.float32(0.25)
    np.testing.assert_allclose(z.cpu().numpy(), np.where(keep, x * np.float32(1 / 0.75), 0.0), rtol=1e-6)


def test_a_scalar_offset_draws_one_number_per_tile(cases):
    z = nans(10_000)
    launch(cases.one_draw_per_tile, 5, tile.partition(z, [128]))
    np.testing.assert_allclose(z.cpu().numpy(), random.normal(5, np.arange(10_000) // 128), rtol=1e-5, atol=1e-5)
