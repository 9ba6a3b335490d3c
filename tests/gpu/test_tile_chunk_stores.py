"""Chunked stores (tests/tile_chunk_cases.py) on a real GPU, against NumPy at ragged sizes.

A block owns a tile larger than one store and writes it chunk by chunk; the
same kernels run on the CPU emulator in tests/test_tile_chunks.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from buildtile import tile

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
TESTS = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def chunked(tmp_path_factory):
    from kernel_packages import compiled_for_this_gpu

    with compiled_for_this_gpu(TESTS / "tile_chunk_cases.py", "bttilechunks", tmp_path_factory.mktemp("chunks")) as ops:
        yield ops


def data(shape, seed):
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(np.float32)


def run(kernel, x: np.ndarray, tile_shape: list[int]) -> np.ndarray:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    z = torch.full(x.shape, float("nan"), dtype=torch.float32, device="cuda")
    kernel(torch.from_numpy(x).to("cuda"), tile.partition(z, tile_shape)).sync_on(stream)
    stream.synchronize()
    return z.cpu().numpy()


@pytest.mark.parametrize("tile_shape", [[2, 256], [1, 1024]])
@pytest.mark.parametrize("shape", [(1, 1), (3, 300), (37, 1000), (513, 4097)])
def test_each_chunk_lands_at_its_index(chunked, tile_shape, shape):
    x = data(shape, 1)
    z = run(chunked.chunk_index_added, x, tile_shape)
    np.testing.assert_array_equal(z, x + (np.arange(shape[1]) // 64).astype(np.float32))


@pytest.mark.parametrize("tile_shape,shape", [([1, 1024], (3, 1000)), ([1, 1024], (1000, 1024)),
                                              ([4, 256], (6, 200)), ([4, 256], (1025, 255))])
def test_softmax_written_in_chunks_matches_numpy(chunked, tile_shape, shape):
    x = data(shape, 2)
    z = run(chunked.softmax_chunked, x, tile_shape)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(z, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("shape", [(64, 64), (100, 90), (1000, 333)])
def test_chunks_along_both_axes_in_an_offset_loop(chunked, shape):
    x = data(shape, 3)
    z = run(chunked.quadrants_reversed, x, [64, 64])
    rows, cols = np.indices(shape)
    np.testing.assert_allclose(z, x * ((rows // 16) * 10 + cols // 32), rtol=1e-6)
