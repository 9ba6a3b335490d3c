"""Tile launches past 65,535 tiles along a leading axis, on a real GPU, against NumPy.

A million rows of ``[1, C]`` tiles once needed a million blocks along grid y
(refused past 65,535); the hosts now launch a linearised grid and each block
decodes its tile (buildtile/backends/tile/schedule.py). The same kernels run
through spilled grids on the CPU emulator in tests/test_tile_emulated_grid.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from buildtile import tile

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiles():
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    return pytest.importorskip("example_kernels.tiles", reason="the example project is not installed")


def run(kernel, *args):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    handles = kernel(*args).sync_on(stream)
    stream.synchronize()
    return [getattr(h, "array", h) for h in handles]


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("rows, cols", [(1_000_000, 100), (65_536, 1024), (1_000_003, 37)])
def test_softmax_over_a_million_rows_matches_numpy(tiles, rows, cols):
    x = rand((rows, cols), 1) * 4
    z = torch.full((rows, cols), float("nan"), device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    pending = tiles.softmax(torch.from_numpy(x).cuda(), tile.partition(z, [1, 1024]))
    assert pending.grid == (rows, 1, 1)          # linearised: the natural grid puts the rows along y
    *_, out = pending.sync_on(stream)
    stream.synchronize()
    out = out.array
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out.cpu().numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_scale_bias_past_65535_rows_of_tiles_matches_numpy(tiles):
    rows, cols = 65_536 * 16 + 5, 300                 # 65,537 rows of (16, 256) tiles, 2 columns
    x, s, b = rand((rows, cols), 2), rand(cols, 3), rand(cols, 4)
    z = torch.full((rows, cols), float("nan"), device="cuda")
    *_, out = run(tiles.scale_bias, torch.from_numpy(x).cuda(), torch.from_numpy(s).cuda(),
                  torch.from_numpy(b).cuda(), tile.partition(z, [16, 256]))
    np.testing.assert_allclose(out.cpu().numpy(), x * s + b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("options", [{}, dict(order="row"), dict(order="grouped", group=3),
                                     dict(persistent=True), dict(order="grouped", group=8, persistent=True)])
@pytest.mark.parametrize("m, n, k", [(1000, 3000, 256), (130, 136, 104), (4099, 511, 64)])
def test_matmul_in_every_order_matches_numpy(tiles, options, m, n, k):
    a = np.random.default_rng(7).standard_normal((m, k)).astype(np.float16)
    b = np.random.default_rng(8).standard_normal((k, n)).astype(np.float16)
    c = torch.zeros((m, n), dtype=torch.float16, device="cuda")
    *_, out = run(tiles.matmul_f16, torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(),
                  tile.partition(c, [128, 128], **options))
    np.testing.assert_allclose(out.float().cpu().numpy(), a.astype(np.float64) @ b, rtol=2e-3,
                               atol=2e-3 * np.sqrt(k))


def test_a_persistent_softmax_over_a_million_rows_matches_numpy(tiles):
    rows, cols = 1_000_000, 100
    x = rand((rows, cols), 5) * 4
    z = torch.full((rows, cols), float("nan"), device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    pending = tiles.softmax(torch.from_numpy(x).cuda(), tile.partition(z, [1, 1024], persistent=True))
    assert pending.grid[0] < rows and pending.grid[1:] == (1, 1)     # one wave, each block looping
    *_, out = pending.sync_on(stream)
    stream.synchronize()
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out.array.cpu().numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
