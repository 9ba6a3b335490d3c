"""Gathers (tests/tile_gather_cases.py) on a real GPU against NumPy at ragged sizes, indices outside
the array reading the padding; the same kernels run on the CPU emulator in tests/test_tile_gather.py."""

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

    with compiled_for_this_gpu(TESTS / "tile_gather_cases.py", "bttilegather", tmp_path_factory.mktemp("g")) as ops:
        yield ops


def rng(seed):
    return np.random.default_rng(seed)


def run(kernel, *args):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    kernel(*args).sync_on(stream)
    stream.synchronize()


def nans(*shape):
    return torch.full(shape, float("nan"), dtype=torch.float32, device="cuda")


@pytest.mark.parametrize("n,m", [(1, 1), (100_003, 3000), (513, 2_000_001)])
def test_take_reads_the_padding_outside_the_array(cases, n, m):
    x = rng(1).standard_normal(m).astype(np.float32)
    idx = rng(2).integers(-5, m + 5, n).astype(np.int32)
    z = nans(n)
    run(cases.take, torch.from_numpy(x).cuda(), torch.from_numpy(idx).cuda(), tile.partition(z, [256]))
    inside = (idx >= 0) & (idx < m)
    np.testing.assert_array_equal(z.cpu().numpy(), np.where(inside, x[np.clip(idx, 0, m - 1)], -1.0))


@pytest.mark.parametrize("vocab,width,n", [(50, 32, 16), (30_000, 333, 1001)])
def test_embedding_rows_with_a_mask(cases, vocab, width, n):
    table = rng(3).standard_normal((vocab, width)).astype(np.float32)
    ids = rng(4).integers(0, vocab, n).astype(np.int64)
    ids[::5] = vocab + 3
    z = nans(n, width)
    run(cases.embedding, torch.from_numpy(table).cuda(), torch.from_numpy(ids).cuda(), tile.partition(z, [16, 32]))
    want = np.where((ids < vocab)[:, None], table[np.minimum(ids, vocab - 1)], 0.0)
    np.testing.assert_array_equal(z.cpu().numpy(), want)


@pytest.mark.parametrize("n", [1, 128, 1_000_001])
def test_reverse_from_computed_indices(cases, n):
    x = rng(5).standard_normal(n).astype(np.float32)
    z = nans(n)
    run(cases.reverse, torch.from_numpy(x).cuda(), tile.partition(z, [128]))
    np.testing.assert_array_equal(z.cpu().numpy(), x[::-1])
