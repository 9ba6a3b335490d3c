"""Scatters (tests/tile_scatter_cases.py) on a real GPU against NumPy at ragged sizes: atomic adds from
every block into tile.Atomic outputs; the same kernels run on the CPU emulator in tests/test_tile_scatter.py."""

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

    with compiled_for_this_gpu(TESTS / "tile_scatter_cases.py", "bttilescatter", tmp_path_factory.mktemp("s")) as ops:
        yield ops


def rng(seed):
    return np.random.default_rng(seed)


def run(kernel, *args):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    kernel(*args).sync_on(stream)
    stream.synchronize()


@pytest.mark.parametrize("n,m", [(1, 1), (100_003, 10), (1_000_001, 3000)])
def test_index_add_accumulates_every_block_onto_the_initial_contents(cases, n, m):
    x = rng(1).integers(-8, 8, n).astype(np.float32)        # small integers: every order of adds is exact
    idx = rng(2).integers(-2, m + 2, n).astype(np.int32)
    acc = rng(3).integers(0, 5, m).astype(np.float32)
    want = acc.copy()
    inside = (idx >= 0) & (idx < m)
    np.add.at(want, idx[inside], x[inside])
    z = torch.full((n,), float("nan"), device="cuda")
    acc_d = torch.from_numpy(acc).cuda()
    run(cases.index_add, torch.from_numpy(x).cuda(), torch.from_numpy(idx).cuda(), tile.partition(z, [256]), acc_d)
    np.testing.assert_array_equal(acc_d.cpu().numpy(), want)
    np.testing.assert_array_equal(z.cpu().numpy(), x * 2)


@pytest.mark.parametrize("shape,bins", [((16, 64), 8), ((1037, 1000), 300)])
def test_histogram_per_band_of_rows(cases, shape, bins):
    x = rng(4).integers(-1, bins + 1, shape).astype(np.int32)
    bands = -(-shape[0] // 16)
    counts = torch.zeros((bands, bins), dtype=torch.int64, device="cuda")
    z = torch.zeros(shape, dtype=torch.int32, device="cuda")
    run(cases.histogram_2d, torch.from_numpy(x).cuda(), tile.partition(z, [16, 64]), counts)
    want = np.zeros((bands, bins), np.int64)
    inside = (x >= 0) & (x < bins)
    rows = np.broadcast_to(np.arange(shape[0])[:, None] // 16, shape)
    np.add.at(want, (rows[inside], x[inside]), 1)
    np.testing.assert_array_equal(counts.cpu().numpy(), want)
    np.testing.assert_array_equal(z.cpu().numpy(), x)
