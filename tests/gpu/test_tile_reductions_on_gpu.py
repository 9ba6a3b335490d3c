"""``tile.argmax``, ``tile.argmin`` and ``tile.prod`` on a real GPU, against torch at ragged sizes:
the kernels of tests/tile_reduction_cases.py (the CPU emulator runs the same ones in
tests/test_tile_reductions.py), compiled here for this GPU and launched through the Tile host."""

from __future__ import annotations

import numpy as np
import pytest
import tile_reduction_cases as cases

from buildtile import tile

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
#: the dtypes torch reduces on a GPU as the kernels do (torch has no argmax of uint8 everywhere)
DTYPES = ("f32", "f16", "bf16", "i32")
TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32}


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    from kernel_packages import compiled_for_this_gpu

    source = tmp_path_factory.mktemp("reduction_source") / "tile_reduction_kernels.py"
    source.write_text(cases.source())
    with compiled_for_this_gpu(source, "bttilereduce", tmp_path_factory.mktemp("tile_reductions")) as module:
        yield module


def to_gpu(a: np.ndarray, dtype: str):
    t = torch.from_numpy(np.ascontiguousarray(a)).to("cuda")
    return t.view(torch.bfloat16) if dtype == "bf16" else t


def launch(kernel, *args) -> None:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    kernel(*args).sync_on(stream)
    stream.synchronize()


def empty(shape, dtype):
    return torch.full(shape, -1, dtype=dtype, device="cuda")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tile_rows,shape", [(4, (1001, 1000)), (4, (3, 1)), (1, (77, 3000))])
def test_argmax_and_argmin_of_rows_match_torch(ops, dtype, tile_rows, shape):
    x = to_gpu(cases.values(dtype, shape, seed=shape[1]), dtype)     # many ties: torch takes the first
    best, worst = empty((shape[0], 1), torch.int32), empty((shape[0], 1), torch.int32)
    product = empty((shape[0], 1), TORCH[dtype])
    launch(getattr(ops, f"rows_{dtype}"), x, *(tile.partition(t, [tile_rows, 1]) for t in (best, worst, product)))
    torch.testing.assert_close(best[:, 0].long(), torch.argmax(x, dim=1), rtol=0, atol=0)
    torch.testing.assert_close(worst[:, 0].long(), torch.argmin(x, dim=1), rtol=0, atol=0)


@pytest.mark.parametrize("tile_rows", [4, 1])
def test_nan_wins_both_at_its_first_position_as_in_torch(ops, tile_rows):
    x = cases.values("f32", (9, 1000), seed=3)
    x[1, [700, 20, 900]] = np.nan
    x[7, :] = np.nan
    x = to_gpu(x, "f32")
    best, worst = empty((9, 1), torch.int32), empty((9, 1), torch.int32)
    launch(ops.rows_f32, x, *(tile.partition(t, [tile_rows, 1]) for t in (best, worst, empty((9, 1), torch.float32))))
    torch.testing.assert_close(best[:, 0].long(), torch.argmax(x, dim=1), rtol=0, atol=0)
    torch.testing.assert_close(worst[:, 0].long(), torch.argmin(x, dim=1), rtol=0, atol=0)
    assert best[1, 0].item() == 20


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tile_rows,shape", [(4, (1001, 1000)), (1, (77, 3000))])
def test_prod_of_rows_matches_torch(ops, dtype, tile_rows, shape):
    x = to_gpu(cases.powers_of_two(dtype, shape, seed=shape[0]), dtype)    # exact products (wrapping for i32)
    best, worst = empty((shape[0], 1), torch.int32), empty((shape[0], 1), torch.int32)
    product = empty((shape[0], 1), TORCH[dtype])
    launch(getattr(ops, f"rows_{dtype}"), x, *(tile.partition(t, [tile_rows, 1]) for t in (best, worst, product)))
    want = torch.prod(x.double() if dtype != "i32" else x, dim=1, dtype=torch.float64 if dtype != "i32" else torch.int32)
    torch.testing.assert_close(product[:, 0], want.to(TORCH[dtype]), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(64, 32), (41, 1000)])
def test_argmax_and_argmin_along_axis_0_match_torch(ops, dtype, shape):
    x = to_gpu(cases.values(dtype, shape, seed=shape[0], spread=3), dtype)
    best, worst = empty((shape[1],), torch.int32), empty((shape[1],), torch.int32)
    launch(getattr(ops, f"cols_{dtype}"), x, tile.partition(best, [32]), tile.partition(worst, [32]))
    torch.testing.assert_close(best.long(), torch.argmax(x, dim=0), rtol=0, atol=0)
    torch.testing.assert_close(worst.long(), torch.argmin(x, dim=0), rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(1001, 1000), (9, 257), (4, 100)])
def test_a_running_pair_over_row_chunks_matches_torch(ops, shape):
    x = cases.values("f32", shape, seed=shape[1], spread=20)
    x[0, :] = 1.0
    x = to_gpu(x, "f32")
    best, value = empty((shape[0],), torch.int32), empty((shape[0],), torch.float32)
    launch(ops.streamed_argmax, x, tile.partition(best, [4]), tile.partition(value, [4]))
    torch.testing.assert_close(best.long(), torch.argmax(x, dim=1), rtol=0, atol=0)
    torch.testing.assert_close(value, torch.amax(x, dim=1), rtol=0, atol=0)
