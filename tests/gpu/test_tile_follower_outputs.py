"""Outputs of different ranks in one kernel (tests/tile_follower_cases.py) on a real GPU, against NumPy
at ragged sizes; the same kernels run on the CPU emulator in tests/test_tile_followers.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from buildtile import tile

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
TESTS = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    from kernel_packages import compiled_for_this_gpu

    with compiled_for_this_gpu(TESTS / "tile_follower_cases.py", "bttilefollow", tmp_path_factory.mktemp("fol")) as ops:
        yield ops


def data(shape, seed):
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(np.float32)


def nans(*shape):
    return torch.full(shape, float("nan"), dtype=torch.float32, device="cuda")


def launch(kernel, *args):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    kernel(*args).sync_on(stream)
    stream.synchronize()


@pytest.mark.parametrize("tile_shape", [[1, 1024], [4, 256]])
@pytest.mark.parametrize("shape", [(1, 1), (37, 200), (1025, 256)])
def test_softmax_with_row_statistics_matches_numpy(cases, tile_shape, shape):
    x = data(shape, 1)
    z, row_max, row_sum = nans(*shape), nans(shape[0]), nans(shape[0])
    rows = tile_shape[0]
    launch(cases.softmax_with_stats, torch.from_numpy(x).cuda(), tile.partition(row_max, [rows]),
           tile.partition(z, tile_shape), tile.partition(row_sum, [rows]))
    m = x.max(axis=1)
    e = np.exp(x.astype(np.float64) - m[:, None])
    np.testing.assert_array_equal(row_max.cpu().numpy(), m)
    np.testing.assert_allclose(row_sum.cpu().numpy(), e.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(z.cpu().numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("shape", [(2, 4, 64), (33, 3, 50)])
def test_rank_three_with_followers_of_ranks_two_and_one(cases, shape):
    x = data(shape, 2)
    z, mean, first = nans(*shape), nans(*shape[:2]), nans(shape[0])
    launch(cases.centre_3d, torch.from_numpy(x).cuda(), tile.partition(z, [2, 4, 64]),
           tile.partition(mean, [2, 4]), tile.partition(first, [2]))
    mu = x.mean(axis=2)
    np.testing.assert_allclose(mean.cpu().numpy(), mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(z.cpu().numpy(), x - mu[:, :, None], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(first.cpu().numpy(), x[:, 0, 0])


@pytest.mark.parametrize("shape", [(4, 64), (1001, 3000)])
def test_only_the_first_block_along_the_other_axes_stores_a_follower(cases, shape):
    x = np.abs(data(shape, 3)) + 1.0
    z, row_sum, writer = nans(*shape), nans(shape[0]), nans(shape[0])
    launch(cases.row_sum_over_wide_rows, torch.from_numpy(x).cuda(), tile.partition(z, [4, 64]),
           tile.partition(row_sum, [4]), tile.partition(writer, [4]))
    np.testing.assert_allclose(row_sum.cpu().numpy(), x.sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(writer.cpu().numpy(), 0.0)
    np.testing.assert_allclose(z.cpu().numpy(), x / x.sum(axis=1, keepdims=True), rtol=1e-5)
