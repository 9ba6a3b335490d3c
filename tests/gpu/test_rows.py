"""The row kernels of example_kernels.rows on a real GPU, against torch, at ragged sizes.

Compiled here for this GPU into a throwaway package. Every specialisation runs at a row
length that fills it (ragged), at one that leaves it mostly empty, and, for the largest,
at rows longer than a tile (the streamed path). The same kernels run on the CPU emulator
in tests/test_tile_rows_emulated.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from buildtile import tile

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

ROWS = Path(__file__).parents[2] / "example_project/example_kernels/rows.py"
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
TOLERANCE = {"f32": 1e-5, "bf16": 2e-2, "f16": 2e-3}
#: tile shapes by row length, as rows.py lists them (the last one streamed in chunks)
TILES = {"f32": [(32, 256), (4, 1024), (2, 4096), (1, 16384), (1, 32768), (1, 65536)],
         "bf16": [(32, 256), (4, 1024), (1, 4096), (1, 16384), (1, 32768), (1, 65536)]}
TILES["f16"] = TILES["bf16"]
#: (tile, rows, columns): a ragged fill, a short row, rows over several held tiles, and streamed
#: rows (one chunk, ragged chunks, rows over two tiles)
SHAPES = [(0, 70, 255), (0, 33, 1), (1, 9, 1000), (2, 5, 4000), (2, 3, 129), (3, 3, 16000), (4, 2, 32768),
          (4, 2, 70001), (1, 5, 2500), (5, 3, 3000), (5, 4, 65536), (5, 2, 140001)]


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    from kernel_packages import compiled_for_this_gpu

    with compiled_for_this_gpu(ROWS, "btrows", tmp_path_factory.mktemp("rows")) as ops:
        yield ops


def run(kernel, *args):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    handles = kernel(*args).sync_on(stream)
    stream.synchronize()
    return [getattr(h, "array", h) for h in handles]


def inputs(shape, dtype, seed, shift=0.0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(shape, generator=g, device="cuda") * 3 + shift).to(DTYPES[dtype])


def close(got, want, dtype, scale=1):
    tol = TOLERANCE[dtype] * scale if dtype == "f32" else TOLERANCE[dtype]
    torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("k,n_rows,n_cols", SHAPES)
def test_softmax(rows, dtype, k, n_rows, n_cols):
    x = inputs((n_rows, n_cols), dtype, 1)
    z = torch.full_like(x, float("nan"))
    run(rows.softmax, x, tile.partition(z, list(TILES[dtype][k])))
    close(z, torch.softmax(x.float(), dim=1).to(x.dtype), dtype)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("k,n_rows,n_cols", SHAPES)
def test_layernorm(rows, dtype, k, n_rows, n_cols):
    x = inputs((n_rows, n_cols), dtype, 2, shift=20.0)
    w, b = inputs(n_cols, dtype, 3), inputs(n_cols, dtype, 4)
    z = torch.full_like(x, float("nan"))
    run(rows.layernorm, x, w, b, 1e-5, tile.partition(z, list(TILES[dtype][k])))
    want = torch.nn.functional.layer_norm(x.float(), (n_cols,), w.float(), b.float(), 1e-5).to(x.dtype)
    close(z, want, dtype, scale=10)      # statistics summed in another order than torch's


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("k,n_rows,n_cols", SHAPES)
def test_rmsnorm(rows, dtype, k, n_rows, n_cols):
    x = inputs((n_rows, n_cols), dtype, 5)
    w = inputs(n_cols, dtype, 6)
    z = torch.full_like(x, float("nan"))
    run(rows.rmsnorm, x, w, 1e-6, tile.partition(z, list(TILES[dtype][k])))
    xf = x.float()
    want = (xf * torch.rsqrt(xf.pow(2).mean(dim=1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)
    close(z, want, dtype)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("tile_rows", [32, 8, 2, 1])
@pytest.mark.parametrize("n_rows,n_cols", [(70, 255), (9, 1000), (3, 9000), (2, 70001)])
def test_cross_entropy(rows, dtype, tile_rows, n_rows, n_cols):
    logits = inputs((n_rows, n_cols), dtype, 7)
    target = torch.randint(0, n_cols, (n_rows,), device="cuda")
    target[0] = n_cols - 1
    loss = torch.full((n_rows,), float("nan"), device="cuda")
    run(rows.cross_entropy, logits, target, tile.partition(loss, [tile_rows]))
    want = torch.nn.functional.cross_entropy(logits.float(), target, reduction="none")
    torch.testing.assert_close(loss, want, rtol=1e-5, atol=1e-4)
