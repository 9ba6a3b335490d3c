"""Tile kernels over every element type, and their NumPy references.

The kernels are written from one template per family (:func:`source`), so
each dtype gets the same body: casts from one dtype into all the others,
integer bit operations and shifts, float arithmetic and powers, implicit
promotions, and the loop and constant forms. The CPU emulator
(tests/test_tile_dtypes_emulated.py) and the GPU (tests/gpu/test_tile_dtypes.py)
run the same source; a test writes it to a file and builds it from there.
"""

from __future__ import annotations

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


def shift_left(x: np.ndarray, s: np.ndarray, dtype: str) -> np.ndarray:
    """``x << s``, an amount of ``bits`` or more giving 0 (as the kernels define it)."""
    return wrap([int(a) << int(b) if int(b) < BITS[dtype] else 0 for a, b in zip(x, s)], dtype)


def shift_right(x: np.ndarray, s, dtype: str) -> np.ndarray:
    """``x >> s``: arithmetic for signed, logical for unsigned; ``bits`` or more shifts every bit out."""
    s = np.broadcast_to(s, x.shape)
    return wrap([int(a) >> min(int(b), BITS[dtype]) for a, b in zip(x, s)], dtype)
