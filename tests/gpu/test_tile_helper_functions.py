"""Kernels built from ``@tile.function`` helpers (tests/tile_function_cases.py) on a real GPU, against
NumPy at ragged sizes; the same kernels run on the CPU emulator in tests/test_tile_functions.py."""

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

    with compiled_for_this_gpu(TESTS / "tile_function_cases.py", "bttilefn", tmp_path_factory.mktemp("fn")) as ops:
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


@pytest.mark.parametrize("tile_shape,shape", [([4, 256], (1, 1)), ([4, 256], (1001, 200)), ([1, 1024], (77, 1000))])
def test_a_helper_inlined_into_a_kernel_matches_numpy(cases, tile_shape, shape):
    x = data(shape, 1)
    z = nans(*shape)
    launch(cases.softmax_by_helper, torch.from_numpy(x).cuda(), tile.partition(z, tile_shape))
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(z.cpu().numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("shape", [(4, 256), (1037, 200)])
def test_helpers_with_tuples_scalars_defaults_and_nesting_match_numpy(cases, shape):
    x = data(shape, 2)
    z, mean, var = nans(*shape), nans(shape[0]), nans(shape[0])
    launch(cases.normalise_by_helpers, torch.from_numpy(x).cuda(), 0.5, tile.partition(z, [4, 256]),
           tile.partition(mean, [4]), tile.partition(var, [4]))
    mu = x.astype(np.float64).mean(axis=1)
    np.testing.assert_allclose(mean.cpu().numpy(), mu, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(var.cpu().numpy(), x.astype(np.float64).var(axis=1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(z.cpu().numpy(), (x - mu[:, None]) * 0.5 + 1.0, rtol=1e-5, atol=1e-5)
