"""Every Tile element type on the CPU emulator, against NumPy at ragged sizes: casts between all
of them, integer bit operations, shifts (constant and run-time amounts), ``//`` and ``%``, float
arithmetic and small integer powers, implicit promotions, and the loop and constant forms
(kernels: tests/tile_dtype_cases.py)."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
import tile_dtype_cases as cases
from tile_dtype_cases import BITS, DTYPES, FLOATS, INTS, NUMPY, shift_left, shift_right
from tile_emulator import Emulated, bf16_bits, bf16_values

from buildtile.backend import CompileOptions
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends

SIZES = [1, 700, 1000]


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    path = tmp_path_factory.mktemp("dtype_cases") / "tile_dtype_kernels.py"
    path.write_text(cases.source())
    registry = backends()
    impl = registry["tile"].impl
    sources = {s.name: s for s in find_kernels(KernelModule("tile_dtype_kernels", path), registry, path.parent)}

    @cache
    def emulated(name: str) -> Emulated:
        kernel = impl.analyze(sources[name], CompileOptions())
        return Emulated(impl.specializations(kernel)[0], kernel.params)

    return emulated


def rng(seed):
    return np.random.default_rng(seed)


def as_float(a: np.ndarray, dtype: str) -> np.ndarray:
    """The values of an array of ``dtype`` as float64 (bf16 arrays hold bits)."""
    return bf16_values(a).astype(np.float64) if dtype == "bf16" else a.astype(np.float64)


def of_float(values: np.ndarray, dtype: str) -> np.ndarray:
    """Float values as an array of ``dtype``, rounded to nearest even (bf16: its bits)."""
    return bf16_bits(values.astype(np.float32)) if dtype == "bf16" else values.astype(NUMPY[dtype])


def empty(n: int, dtype: str) -> np.ndarray:
    return np.full(n, 0x55, NUMPY[dtype]) if dtype[0] in "iu" else of_float(np.full(n, np.nan), dtype)


def cast_input(src: str, n: int) -> np.ndarray:
    """Values every destination holds without overflow: 0..100 with fractions for floats,
    -100..100 for signed and 0..200 for unsigned integers (int -> int wraps, as NumPy's does)."""
    r = rng(BITS[src] + n)
    if src in FLOATS:
        return of_float(r.uniform(0, 100, n).astype(np.float32), src)
    low = -100 if src[0] == "i" else 0
    return r.integers(low, low + 201, n).astype(NUMPY[src])


def expected_cast(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    if src in FLOATS and dst in INTS:
        return np.trunc(as_float(x, src)).astype(NUMPY[dst])
    if dst in FLOATS:
        values = as_float(x, src) if src in FLOATS else x.astype(np.float64)
        return of_float(values.astype(np.float32) if dst in ("f16", "bf16") else values, dst)
    return x.astype(NUMPY[dst])


@pytest.mark.parametrize("n", [1, 1000])
@pytest.mark.parametrize("src", DTYPES)
def test_astype_converts_between_every_pair_of_dtypes(kernels, src, n):
    x = cast_input(src, n)
    outs = [empty(n, d) for d in DTYPES]
    kernels(f"cast_from_{src}")(x, *outs)
    for dst, got in zip(DTYPES, outs):
        np.testing.assert_array_equal(got, expected_cast(x, src, dst), err_msg=f"{src} -> {dst}")


def int_inputs(dtype: str, n: int):
    r = rng(BITS[dtype] * 7 + n)
    info = np.iinfo(NUMPY[dtype])
    x = r.integers(int(info.min) + 1, int(info.max), n, dtype=NUMPY[dtype], endpoint=True)
    low = -7 if dtype[0] == "i" else 1
    y = r.integers(low, 8, n).astype(NUMPY[dtype])
    y[y == 0] = 3
    s = r.integers(0, BITS[dtype] + 3, n).astype(NUMPY[dtype])    # amounts past the width too
    return x, y, s


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", INTS)
def test_integer_bit_operations_shifts_and_division(kernels, dtype, n):
    x, y, s = int_inputs(dtype, n)
    outs = {o: empty(n, dtype) for o in cases.INT_OUTS}
    kernels(f"int_ops_{dtype}")(x, y, s, 5, *outs.values())
    xi = [int(v) for v in x]
    want = {
        "and_": x & y, "or_": x | y, "xor": x ^ y, "inv": ~x,
        "shl3": shift_left(x, np.full(n, 3), dtype), "shr2": shift_right(x, 2, dtype),
        "shl_t": shift_left(x, s, dtype), "shr_t": shift_right(x, s, dtype), "shr_k": shift_right(x, 5, dtype),
        "fdiv": cases.wrap([a // int(b) for a, b in zip(xi, y)], dtype),
        "mod": cases.wrap([a % int(b) for a, b in zip(xi, y)], dtype),
        "square": cases.wrap([a * a for a in xi], dtype),
    }
    for name, got in outs.items():
        np.testing.assert_array_equal(got, want[name], err_msg=f"{name} of {dtype}")


def rounded(values: np.ndarray, dtype: str) -> np.ndarray:
    """``values`` rounded to ``dtype``'s precision, as float64 (each operation of the kernel rounds)."""
    return as_float(of_float(values, dtype), dtype)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_float_arithmetic_powers_and_integer_conditions(kernels, dtype, n):
    r = rng(BITS[dtype] + n)
    x = of_float(r.standard_normal(n) * 3, dtype)
    y = of_float(r.uniform(0.5, 4.0, n) * r.choice([-1, 1], n), dtype)
    m = r.integers(-2, 3, n).astype(np.int32)
    outs = {o: empty(n, dtype) for o in cases.FLOAT_OUTS}
    kernels(f"float_ops_{dtype}")(x, y, m, *outs.values())
    a, b = as_float(x, dtype), as_float(y, dtype)
    # f16/bf16 compute each operation in f32 and round; f32 in f32; f64 in f64
    work = (lambda v: v.astype(np.float32).astype(np.float64)) if dtype != "f64" else (lambda v: v)
    with np.errstate(all="ignore"):
        want = {
            "add": rounded(work(a + b), dtype), "sub": rounded(work(a - b), dtype),
            "mul": rounded(work(a * b), dtype), "div": rounded(work(a / b), dtype),
            "cube": rounded(work(a * rounded(work(a * a), dtype)), dtype),
            "sel": np.where(m != 0, a, b), "sq": rounded(work(a * a), dtype),
        }
    for name, got in outs.items():
        if dtype == "f32" and name == "div":
            np.testing.assert_allclose(as_float(got, dtype), want[name], rtol=2e-7, err_msg=name)
            continue
        np.testing.assert_array_equal(as_float(got, dtype), want[name], err_msg=f"{name} of {dtype}")


@pytest.mark.parametrize("rows", [1, 37])
@pytest.mark.parametrize("dtype", DTYPES)
def test_row_reductions_of_every_dtype(kernels, dtype, rows):
    r = rng(BITS[dtype] + rows)
    if dtype in FLOATS:     # small integers: every order of summation gives the same value
        x = of_float(r.integers(-8, 9, (rows, 64)).astype(np.float32), dtype)
    else:
        info = np.iinfo(NUMPY[dtype])
        x = r.integers(int(info.min), int(info.max), (rows, 64), dtype=NUMPY[dtype], endpoint=True)
    outs = [empty(rows, dtype).reshape(rows, 1) for _ in range(3)]
    kernels(f"reduce_{dtype}")(x, *outs)
    values = as_float(x, dtype) if dtype in FLOATS else x
    total = values.sum(axis=1, keepdims=True, dtype=np.float64 if dtype in FLOATS else NUMPY[dtype])
    for got, want in zip(outs, [total, values.max(axis=1, keepdims=True), values.min(axis=1, keepdims=True)]):
        np.testing.assert_array_equal(as_float(got, dtype) if dtype in FLOATS else got, want)


@pytest.mark.parametrize("n", SIZES)
def test_lossless_mixes_promote_implicitly(kernels, n):
    r = rng(n)
    a = r.integers(-128, 128, n).astype(np.int8)
    b = r.integers(-30000, 30000, n).astype(np.int16)
    c = r.integers(0, 256, n).astype(np.uint8)
    h = (r.standard_normal(n) * 10).astype(np.float16)
    f = r.standard_normal(n).astype(np.float32)
    wide, prod, mixed, unsigned = empty(n, "i16"), empty(n, "f32"), empty(n, "f16"), empty(n, "u32")
    kernels("promotions")(a, b, c, h, f, wide, prod, mixed, unsigned)
    np.testing.assert_array_equal(wide, a.astype(np.int16) + b)
    np.testing.assert_array_equal(prod, h.astype(np.float32) * f)
    np.testing.assert_array_equal(mixed, (a.astype(np.float32) + h.astype(np.float32)).astype(np.float16))
    np.testing.assert_array_equal(unsigned, (c.astype(np.uint32) * 2))


@pytest.mark.parametrize("n", [1, 300])
@pytest.mark.parametrize("count,step", [(5, 1), (7, 3), (6, -2), (0, 4), (4, 0)])
def test_loop_forms_follow_python(kernels, n, count, step):
    x = rng(n).standard_normal(n).astype(np.float32)
    z = empty(n, "f32")
    kernels("loop_forms")(x, count, step, z)
    doubled = count * 2
    up = sum(range(0, doubled, step)) if step else 0
    down = 0.5 * len(range(doubled, 0, step)) if step else 0.0
    acc = np.float32(up) + np.float32(down) - np.float32(0.25 * len(range(doubled, 0, -3)))
    t = np.exp2(x * np.float32(1.0 / math.log(2))) * np.float32(math.sqrt(2.0))
    want = acc + t + np.float32(2.0) + (np.arange(n) % 256 + 4).astype(np.float32)   # per tile
    np.testing.assert_allclose(z, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 2, 16, 32), (3, 5, 40, 70)])
def test_rank4_tiles_reduce_and_broadcast(kernels, shape):
    x = rng(len(shape)).standard_normal(shape).astype(np.float32)
    z = empty(math.prod(shape), "f32").reshape(shape)
    kernels("rank4")(x, z)
    # the sum runs over each 32-column tile of a row
    cols = np.pad(x, [(0, 0)] * 3 + [(0, -shape[3] % 32)]).reshape(*shape[:3], -1, 32)
    sums = np.repeat(cols.sum(axis=4), 32, axis=3)[..., :shape[3]]
    np.testing.assert_allclose(z, x * 2 + sums, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 2, 8, 2, 16), (2, 3, 19, 5, 20)])
def test_rank5_tiles_permute_and_reduce(kernels, shape):
    x = rng(5).standard_normal(shape).astype(np.float16)
    out_shape = (shape[0], shape[1], shape[3], shape[2], shape[4])
    z = empty(math.prod(out_shape), "f32").reshape(out_shape)
    kernels("rank5")(x, z)
    # the maximum runs over each 8-long tile of axis 2 of x (padding 0 past the edge)
    pad = -shape[2] % 8
    tiles = np.pad(x.astype(np.float32), [(0, 0), (0, 0), (0, pad), (0, 0), (0, 0)])
    tiles = tiles.reshape(shape[0], shape[1], -1, 8, shape[3], shape[4])
    maxima = np.repeat(tiles.max(axis=3), 8, axis=2)[:, :, :shape[2]]
    want = (x.astype(np.float32) - maxima).transpose(0, 1, 3, 2, 4)
    np.testing.assert_array_equal(z, want)
