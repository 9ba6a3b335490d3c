"""Tile kernels over every element type, and their NumPy references.

The kernels are written from one template per family (:func:`source`), so
each dtype gets the same body: casts from one dtype into all the others,
integer bit operations and shifts, float arithmetic and powers, implicit
promotions, and the loop and constant forms. The CPU emulator
(tests/test_tile_dtypes_emulated.py) and the GPU (tests/gpu/test_tile_dtypes.py)
run the same source; a test writes it to a file and builds it from there.
"""

from __future__ import annotations

import math

import numpy as np

DTYPES = ["f16", "bf16", "f32", "f64", "i8", "u8", "i16", "u16", "i32", "u32", "i64"]
INTS = [d for d in DTYPES if d[0] in "iu"]
FLOATS = [d for d in DTYPES if d[0] in "fb"]
BITS = {d: int(d.lstrip("fbiu") or 16) for d in DTYPES}
#: how NumPy holds each dtype (bf16 as its 16 bits)
NUMPY = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64, "i8": np.int8,
         "u8": np.uint8, "i16": np.int16, "u16": np.uint16, "i32": np.int32, "u32": np.uint32, "i64": np.int64}
TILE = 256
INT_OUTS = ["and_", "or_", "xor", "inv", "shl3", "shr2", "shl_t", "shr_t", "shr_k", "fdiv", "mod", "square"]
FLOAT_OUTS = ["add", "sub", "mul", "div", "cube", "sel", "sq"]


def _spec(outs: list[str]) -> str:
    return "[{" + ", ".join(f'"{o}": [{TILE}]' for o in outs) + "}]"


def source() -> str:
    """The kernel module's text."""
    out = ["import math", "", "from buildtile import tile",
           f"from buildtile.types import Tensor, {', '.join(DTYPES)}", "",
           "LOG2E = 1.0 / math.log(2)", "ROOT2 = math.sqrt(2.0)", ""]
    for src in DTYPES:
        outs = [f"o_{d}" for d in DTYPES]
        params = ", ".join(f"o_{d}: tile.Out[{d}, 1]" for d in DTYPES)
        out += ["", f"@tile.kernel(specialize={_spec(outs)})", f"def cast_from_{src}(x: Tensor[{src}, 1], {params}):",
                f"    t = tile.load_like(x, o_{src})"]
        out += [f"    o_{d}.store(t.astype({d}))" for d in DTYPES]
        out.append("")
    for d in INTS:
        params = ", ".join(f"{o}: tile.Out[{d}, 1]" for o in INT_OUTS)
        out += ["", f"@tile.kernel(specialize={_spec(INT_OUTS)})",
                f"def int_ops_{d}(x: Tensor[{d}, 1], y: Tensor[{d}, 1], s: Tensor[{d}, 1], k: i32, {params}):",
                "    a = tile.load_like(x, and_)",
                "    b = tile.load_like(y, and_, padding=1)   # no division by zero past the edge",
                "    amount = tile.load_like(s, and_)",
                "    and_.store(a & b)",
                "    or_.store(a | b)",
                "    xor.store(a ^ b)",
                "    inv.store(~a)",
                "    shl3.store(a << 3)",
                "    shr2.store(a >> 2)",
                "    shl_t.store(a << amount)",
                "    shr_t.store(a >> amount)",
                "    shr_k.store(a >> k)",
                "    fdiv.store(a // b)",
                "    mod.store(a % b)",
                "    square.store(a ** 2)", ""]
    for d in FLOATS:
        params = ", ".join(f"{o}: tile.Out[{d}, 1]" for o in FLOAT_OUTS)
        out += ["", f"@tile.kernel(specialize={_spec(FLOAT_OUTS)})",
                f"def float_ops_{d}(x: Tensor[{d}, 1], y: Tensor[{d}, 1], m: Tensor[i32, 1], {params}):",
                "    a = tile.load_like(x, add)",
                "    b = tile.load_like(y, add)",
                "    add.store(a + b)",
                "    sub.store(a - b)",
                "    mul.store(a * b)",
                "    div.store(a / b)",
                "    cube.store(a ** 3)",
                "    sel.store(tile.where(tile.load_like(m, add), a, b))",
                "    v = a",
                "    v **= 2",
                "    sq.store(v)", ""]
    for d in DTYPES:
        out += ["", '@tile.kernel(specialize=[{"total": [16, 1], "top": [16, 1], "bottom": [16, 1]}])',
                f"def reduce_{d}(x: Tensor[{d}, 2], total: tile.Out[{d}, 2], top: tile.Out[{d}, 2], "
                f"bottom: tile.Out[{d}, 2]):",
                "    t = tile.load(x, (total.tile_id(0), 0), (16, 64))",
                "    total.store(tile.sum(t, axis=1, keepdims=True))",
                "    top.store(t.max(axis=1, keepdims=True))",
                "    bottom.store(tile.min(t, 1, True))", ""]
    out += ['''
@tile.kernel(specialize=[{"wide": [256], "prod": [256], "mixed": [256], "unsigned": [256]}])
def promotions(a: Tensor[i8, 1], b: Tensor[i16, 1], c: Tensor[u8, 1], h: Tensor[f16, 1], f: Tensor[f32, 1],
               wide: tile.Out[i16, 1], prod: tile.Out[f32, 1], mixed: tile.Out[f16, 1], unsigned: tile.Out[u32, 1]):
    """Lossless widening and int-with-float are implicit; a store widens too."""
    ta = tile.load_like(a, wide)
    tc = tile.load_like(c, wide)
    wide.store(ta + tile.load_like(b, wide))
    prod.store(tile.load_like(h, wide) * tile.load_like(f, wide))
    mixed.store(ta + tile.load_like(h, wide))
    unsigned.store(tc + tc.astype(u16))


@tile.kernel(specialize=[{"z": [1, 2, 16, 32]}])
def rank4(x: Tensor[f32, 4], z: tile.Out[f32, 4]):
    """(batch, heads, seq, dim) tiles: a reduction over the last axis, broadcast back."""
    t = tile.load_like(x, z)
    z.store(t * 2.0 + t.sum(axis=3, keepdims=True))


@tile.kernel(specialize=[{"z": [1, 2, 2, 8, 16]}])
def rank5(x: Tensor[f16, 5], z: tile.Out[f32, 5]):
    """z = x with axes 2 and 3 swapped, less the maximum over the swapped axis."""
    t = tile.load(x, (z.tile_id(0), z.tile_id(1), z.tile_id(3), z.tile_id(2), z.tile_id(4)), (1, 2, 8, 2, 16))
    z.store(t.permute(0, 1, 3, 2, 4).astype(f32) - t.max(axis=2, keepdims=True).permute(0, 1, 3, 2, 4))


@tile.kernel(specialize=[{"z": [256]}])
def loop_forms(x: Tensor[f32, 1], n: i64, step: i64, z: tile.Out[f32, 1]):
    """A run-time step (either sign), a constant negative one, a shadowed parameter, folded math constants."""
    acc = tile.zeros((256,), f32)
    n = n * 2
    for k in tile.range(0, n, step):
        acc += k
    for k in tile.range(n, 0, step):
        acc += 0.5
    for k in tile.range(n, 0, -3):
        acc -= 0.25
    t = tile.load_like(x, z)
    z.store(acc + tile.exp2(t * LOG2E) * ROOT2 + math.sqrt(4.0) + tile.arange(4, 260).astype(f32))
''']
    return "\n".join(out)


# ---------------------------------------------------------------- NumPy references
# Each ``*_case`` gives a kernel's arguments (outputs as arrays to fill) and what NumPy says the
# outputs hold; arrays of bf16 hold its bits (uint16).


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def bf16_bits(a: np.ndarray) -> np.ndarray:
    """bf16 values (as uint16 bit patterns) nearest to ``a`` (round to nearest even)."""
    bits = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def as_float(a: np.ndarray, dtype: str) -> np.ndarray:
    """The values of an array of ``dtype`` as float64 (bf16 arrays hold bits)."""
    return bf16_values(a).astype(np.float64) if dtype == "bf16" else a.astype(np.float64)


def of_float(values: np.ndarray, dtype: str) -> np.ndarray:
    """Float values as an array of ``dtype``, rounded to nearest even (bf16: its bits)."""
    return bf16_bits(values.astype(np.float32)) if dtype == "bf16" else values.astype(NUMPY[dtype])


def empty(shape, dtype: str) -> np.ndarray:
    """An output to fill: a pattern for integers, NaN for floats."""
    if dtype in INTS:
        return np.full(shape, 0x55, NUMPY[dtype])
    return of_float(np.full(shape, np.nan), dtype)


def wrap(values, dtype: str) -> np.ndarray:
    """Python integers wrapped into ``dtype``'s bits, as the hardware's arithmetic wraps."""
    bits = BITS[dtype]
    mask = (1 << bits) - 1
    out = []
    for v in values:
        v &= mask
        if dtype[0] == "i" and v >> (bits - 1):
            v -= 1 << bits
        out.append(v)
    return np.array(out, dtype=NUMPY[dtype])


def shift_left(x: np.ndarray, s, dtype: str) -> np.ndarray:
    """``x << s``, an amount of ``bits`` or more giving 0 (as the kernels define it)."""
    s = np.broadcast_to(s, x.shape)
    return wrap([int(a) << int(b) if int(b) < BITS[dtype] else 0 for a, b in zip(x, s)], dtype)


def shift_right(x: np.ndarray, s, dtype: str) -> np.ndarray:
    """``x >> s``: arithmetic for signed, logical for unsigned; ``bits`` or more shifts every bit out."""
    s = np.broadcast_to(s, x.shape)
    return wrap([int(a) >> min(int(b), BITS[dtype]) for a, b in zip(x, s)], dtype)


def cast_case(src: str, n: int):
    """Values every destination holds without overflow: 0..100 with fractions for floats,
    -100..100 for signed and 0..200 for unsigned integers (int -> int wraps, as NumPy's does)."""
    r = rng(BITS[src] + n)
    if src in FLOATS:
        x = of_float(r.uniform(0, 100, n).astype(np.float32), src)
    else:
        low = -100 if src[0] == "i" else 0
        x = r.integers(low, low + 201, n).astype(NUMPY[src])
    want = {}
    for dst in DTYPES:
        if src in FLOATS and dst in INTS:
            want[dst] = np.trunc(as_float(x, src)).astype(NUMPY[dst])
        elif dst in FLOATS:
            values = as_float(x, src) if src in FLOATS else x.astype(np.float64)
            want[dst] = of_float(values.astype(np.float32) if dst in ("f16", "bf16") else values, dst)
        else:
            want[dst] = x.astype(NUMPY[dst])
    return [x] + [empty(n, d) for d in DTYPES], want


#: the run-time scalar amount of ``int_ops_*``
SHIFT_K = 5


def int_case(dtype: str, n: int):
    r = rng(BITS[dtype] * 7 + n)
    info = np.iinfo(NUMPY[dtype])
    x = r.integers(int(info.min) + 1, int(info.max), n, dtype=NUMPY[dtype], endpoint=True)
    low = -7 if dtype[0] == "i" else 1
    y = r.integers(low, 8, n).astype(NUMPY[dtype])
    y[y == 0] = 3
    s = r.integers(0, BITS[dtype] + 3, n).astype(NUMPY[dtype])    # amounts past the width too
    xi = [int(v) for v in x]
    want = {
        "and_": x & y, "or_": x | y, "xor": x ^ y, "inv": ~x,
        "shl3": shift_left(x, 3, dtype), "shr2": shift_right(x, 2, dtype),
        "shl_t": shift_left(x, s, dtype), "shr_t": shift_right(x, s, dtype), "shr_k": shift_right(x, SHIFT_K, dtype),
        "fdiv": wrap([a // int(b) for a, b in zip(xi, y)], dtype),
        "mod": wrap([a % int(b) for a, b in zip(xi, y)], dtype),
        "square": wrap([a * a for a in xi], dtype),
    }
    return [x, y, s, SHIFT_K] + [empty(n, dtype) for _ in INT_OUTS], want


def rounded(values: np.ndarray, dtype: str) -> np.ndarray:
    """``values`` rounded to ``dtype``'s precision, as float64."""
    return as_float(of_float(values, dtype), dtype)


def float_case(dtype: str, n: int):
    """Values of the float kernels; each operation rounds (f16/bf16 compute in f32, f32 in f32,
    f64 in f64), so the references round after every operation too."""
    r = rng(BITS[dtype] + n)
    x = of_float(r.standard_normal(n) * 3, dtype)
    y = of_float(r.uniform(0.5, 4.0, n) * r.choice([-1, 1], n), dtype)
    m = r.integers(-2, 3, n).astype(np.int32)
    a, b = as_float(x, dtype), as_float(y, dtype)
    work = (lambda v: v.astype(np.float32).astype(np.float64)) if dtype != "f64" else (lambda v: v)
    want = {
        "add": rounded(work(a + b), dtype), "sub": rounded(work(a - b), dtype),
        "mul": rounded(work(a * b), dtype), "div": rounded(work(a / b), dtype),
        "cube": rounded(work(a * rounded(work(a * a), dtype)), dtype),
        "sel": np.where(m != 0, a, b), "sq": rounded(work(a * a), dtype),
    }
    return [x, y, m] + [empty(n, dtype) for _ in FLOAT_OUTS], want


def reduce_case(dtype: str, rows: int):
    r = rng(BITS[dtype] + rows)
    if dtype in FLOATS:     # small integers: every order of summation gives the same value
        x = of_float(r.integers(-8, 9, (rows, 64)).astype(np.float32), dtype)
    else:
        info = np.iinfo(NUMPY[dtype])
        x = r.integers(int(info.min), int(info.max), (rows, 64), dtype=NUMPY[dtype], endpoint=True)
    values = as_float(x, dtype) if dtype in FLOATS else x
    total = values.sum(axis=1, keepdims=True, dtype=np.float64 if dtype in FLOATS else NUMPY[dtype])
    want = [total, values.max(axis=1, keepdims=True), values.min(axis=1, keepdims=True)]
    return [x] + [empty((rows, 1), dtype) for _ in range(3)], want


def promotions_case(n: int):
    r = rng(n)
    a = r.integers(-128, 128, n).astype(np.int8)
    b = r.integers(-30000, 30000, n).astype(np.int16)
    c = r.integers(0, 256, n).astype(np.uint8)
    h = (r.standard_normal(n) * 10).astype(np.float16)
    f = r.standard_normal(n).astype(np.float32)
    want = [a.astype(np.int16) + b, h.astype(np.float32) * f,
            (a.astype(np.float32) + h.astype(np.float32)).astype(np.float16), c.astype(np.uint32) * 2]
    return [a, b, c, h, f, empty(n, "i16"), empty(n, "f32"), empty(n, "f16"), empty(n, "u32")], want


def loop_forms_case(n: int, count: int, step: int):
    x = rng(n).standard_normal(n).astype(np.float32)
    doubled = count * 2
    up = sum(range(0, doubled, step)) if step else 0
    down = 0.5 * len(range(doubled, 0, step)) if step else 0.0
    acc = np.float32(up) + np.float32(down) - np.float32(0.25 * len(range(doubled, 0, -3)))
    t = np.exp2(x * np.float32(1.0 / math.log(2))) * np.float32(math.sqrt(2.0))
    want = acc + t + np.float32(2.0) + (np.arange(n) % TILE + 4).astype(np.float32)   # arange is per tile
    return [x, count, step, empty(n, "f32")], want


def rank4_case(shape: tuple[int, ...]):
    x = rng(len(shape)).standard_normal(shape).astype(np.float32)
    # the sum runs over each 32-column tile of a row
    cols = np.pad(x, [(0, 0)] * 3 + [(0, -shape[3] % 32)]).reshape(*shape[:3], -1, 32)
    sums = np.repeat(cols.sum(axis=4), 32, axis=3)[..., :shape[3]]
    return [x, empty(shape, "f32")], x * 2 + sums


def rank5_case(shape: tuple[int, ...]):
    x = rng(5).standard_normal(shape).astype(np.float16)
    out_shape = (shape[0], shape[1], shape[3], shape[2], shape[4])
    # the maximum runs over each 8-long tile of axis 2 of x (padding 0 past the edge)
    tiles = np.pad(x.astype(np.float32), [(0, 0), (0, 0), (0, -shape[2] % 8), (0, 0), (0, 0)])
    tiles = tiles.reshape(shape[0], shape[1], -1, 8, shape[3], shape[4])
    maxima = np.repeat(tiles.max(axis=3), 8, axis=2)[:, :, :shape[2]]
    return [x, empty(out_shape, "f32")], (x.astype(np.float32) - maxima).transpose(0, 1, 3, 2, 4)
