"""Every Tile element type on a real GPU, against NumPy at ragged sizes: the kernels and
references of tests/tile_dtype_cases.py (the CPU emulator runs the same ones in
tests/test_tile_dtypes_emulated.py), compiled here into a throwaway package for this GPU and
launched through the Tile host, each output partitioned into its compiled tile shape."""

from __future__ import annotations

import numpy as np
import pytest
import tile_dtype_cases as cases

from buildtile import tile

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
DTYPES, FLOATS, INTS = cases.DTYPES, cases.FLOATS, cases.INTS
SIZES = [1, 1000, 4097]


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    from kernel_packages import compiled_for_this_gpu

    source = tmp_path_factory.mktemp("dtype_source") / "tile_dtype_kernels.py"
    source.write_text(cases.source())
    with compiled_for_this_gpu(source, "bttiledtypes", tmp_path_factory.mktemp("tile_dtypes")) as module:
        yield module


def to_gpu(a: np.ndarray, dtype: str):
    t = torch.from_numpy(np.ascontiguousarray(a)).to("cuda")
    return t.view(torch.bfloat16) if dtype == "bf16" else t


def to_host(t, dtype: str) -> np.ndarray:
    return (t.view(torch.int16) if dtype == "bf16" else t).cpu().numpy().view(cases.NUMPY[dtype])


def launch(kernel, args: list, dtypes: list[str], outs: dict[int, tuple[str, tuple[int, ...]]]) -> list[np.ndarray]:
    """Run ``kernel`` on ``args`` (NumPy arrays and scalars); ``outs`` maps an argument's position to
    its dtype and tile shape. Returns the outputs, back on the host, in order."""
    gpu = []
    for k, (a, dtype) in enumerate(zip(args, dtypes)):
        if not isinstance(a, np.ndarray):
            gpu.append(a)
            continue
        t = to_gpu(a, dtype)
        gpu.append(tile.partition(t, list(outs[k][1])) if k in outs else t)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    handles = kernel(*gpu).sync_on(stream)
    stream.synchronize()
    arrays = [getattr(h, "array", h) for h in handles]
    return [to_host(arrays[k], outs[k][0]) for k in sorted(outs)]


def tiles_1d(first: int, dtypes: list[str]) -> dict[int, tuple[str, tuple[int, ...]]]:
    return {first + k: (d, (cases.TILE,)) for k, d in enumerate(dtypes)}


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("src", DTYPES)
def test_astype_converts_between_every_pair_of_dtypes(ops, src, n):
    args, want = cases.cast_case(src, n)
    got = launch(getattr(ops, f"cast_from_{src}"), args, [src] + DTYPES, tiles_1d(1, DTYPES))
    for dst, out in zip(DTYPES, got):
        np.testing.assert_array_equal(out, want[dst], err_msg=f"{src} -> {dst}")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", INTS)
def test_integer_bit_operations_shifts_and_division(ops, dtype, n):
    args, want = cases.int_case(dtype, n)
    outs = [dtype] * len(cases.INT_OUTS)
    got = launch(getattr(ops, f"int_ops_{dtype}"), args, [dtype] * 3 + ["i32"] + outs, tiles_1d(4, outs))
    for name, out in zip(cases.INT_OUTS, got):
        np.testing.assert_array_equal(out, want[name], err_msg=f"{name} of {dtype}")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_float_arithmetic_powers_and_integer_conditions(ops, dtype, n):
    with np.errstate(all="ignore"):
        args, want = cases.float_case(dtype, n)
    outs = [dtype] * len(cases.FLOAT_OUTS)
    got = launch(getattr(ops, f"float_ops_{dtype}"), args, [dtype, dtype, "i32"] + outs, tiles_1d(3, outs))
    for name, out in zip(cases.FLOAT_OUTS, got):
        np.testing.assert_array_equal(cases.as_float(out, dtype), want[name], err_msg=f"{name} of {dtype}")


@pytest.mark.parametrize("rows", [1, 37, 1000])
@pytest.mark.parametrize("dtype", DTYPES)
def test_row_reductions_of_every_dtype(ops, dtype, rows):
    args, want = cases.reduce_case(dtype, rows)
    got = launch(getattr(ops, f"reduce_{dtype}"), args, [dtype] * 4, {k: (dtype, (16, 1)) for k in (1, 2, 3)})
    for out, expected in zip(got, want):
        np.testing.assert_array_equal(cases.as_float(out, dtype) if dtype in FLOATS else out, expected)


@pytest.mark.parametrize("n", SIZES)
def test_lossless_mixes_promote_implicitly(ops, n):
    args, want = cases.promotions_case(n)
    dtypes = ["i8", "i16", "u8", "f16", "f32", "i16", "f32", "f16", "u32"]
    got = launch(ops.promotions, args, dtypes, tiles_1d(5, dtypes[5:]))
    for out, expected in zip(got, want):
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("count,step", [(5, 1), (7, 3), (6, -2), (0, 4), (4, 0)])
def test_loop_forms_follow_python(ops, count, step):
    args, want = cases.loop_forms_case(3001, count, step)
    (got,) = launch(ops.loop_forms, args, ["f32", "i64", "i64", "f32"], tiles_1d(3, ["f32"]))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 2, 16, 32), (3, 5, 40, 70)])
def test_rank4_tiles_reduce_and_broadcast(ops, shape):
    args, want = cases.rank4_case(shape)
    (got,) = launch(ops.rank4, args, ["f32", "f32"], {1: ("f32", (1, 2, 16, 32))})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 2, 8, 2, 16), (2, 3, 19, 5, 20)])
def test_rank5_tiles_permute_and_reduce(ops, shape):
    args, want = cases.rank5_case(shape)
    (got,) = launch(ops.rank5, args, ["f16", "f32"], {1: ("f32", (1, 2, 2, 8, 16))})
    np.testing.assert_array_equal(got, want)
