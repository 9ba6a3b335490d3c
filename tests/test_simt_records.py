"""Record element types in SIMT kernels: their C layout (checked against ctypes, which lays
out a struct as the platform's C compiler does) and kernels over NumPy structured arrays,
run on the host (the CPU emulator) at ragged sizes."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from buildtile.emulate.direct import SimtKernel

from buildtile.backends.common.types import BOOL, F16, F32, F64, I8, I16, I64, U8, record_of

UI_PASS = Path(__file__).parent / "ui" / "pass"

_CTYPES = {I8: ctypes.c_int8, U8: ctypes.c_uint8, I16: ctypes.c_int16, F16: ctypes.c_uint16,
           F32: ctypes.c_float, F64: ctypes.c_double, I64: ctypes.c_int64, BOOL: ctypes.c_bool}


@pytest.mark.parametrize("fields", [
    [("x", F32), ("y", F32), ("vx", F32), ("mass", F64), ("alive", BOOL)],
    [("tag", I8), ("value", F64), ("count", I64)],
    [("a", U8), ("b", I16), ("c", U8)],
    [("h", F16), ("d", F64), ("b", BOOL), ("f", F32)],
    [("only", I8)],
])
def test_record_layout_is_the_c_structs(fields):
    rec = record_of("R", fields)
    struct = type("R", (ctypes.Structure,), {"_fields_": [(name, _CTYPES[ty]) for name, ty in fields]})
    assert rec.size == ctypes.sizeof(struct)
    assert rec.align == ctypes.alignment(struct)
    assert [offset for _, _, offset in rec.fields] == [getattr(struct, name).offset for name, _ in fields]


def particles(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = np.dtype([("x", "<f4"), ("y", "<f4"), ("vx", "<f4"), ("mass", "<f8"), ("alive", "?")], align=True)
    p = np.zeros(n, dtype)
    for name in ("x", "y", "vx"):
        p[name] = rng.standard_normal(n)
    p["mass"] = rng.uniform(1, 2, n)
    p["alive"] = rng.uniform(size=n) < 0.7
    return p


@pytest.fixture(scope="module")
def step():
    return SimtKernel(UI_PASS / "records.py", "step")


@pytest.fixture(scope="module")
def weigh():
    return SimtKernel(UI_PASS / "records.py", "weigh")


@pytest.mark.parametrize("n", [1, 127, 129, 300])
def test_field_writes_and_whole_copies_match_numpy(step, n):
    p = particles(n, n)
    assert p.dtype.itemsize == 32
    out = np.zeros_like(p)
    out.view(np.uint8)[:] = 0xAB               # every byte written by the kernel, padding aside
    dt = np.float32(0.125)
    step(-(-n // 128), 128, p, out, dt)
    np.testing.assert_array_equal(out["x"], p["x"] + p["vx"] * dt)
    np.testing.assert_array_equal(out["y"], p["y"])
    np.testing.assert_array_equal(out["vx"], p["vx"])
    np.testing.assert_array_equal(out["mass"], np.where(p["alive"], p["mass"], 0.0))
    np.testing.assert_array_equal(out["alive"], p["alive"])


@pytest.mark.parametrize("n", [1, 100, 257])
def test_fields_of_mixed_widths_read_at_their_offsets(weigh, n):
    rng = np.random.default_rng(n)
    s = np.zeros(n, np.dtype([("tag", "i1"), ("value", "<f8"), ("count", "<i8")], align=True))
    s["tag"] = rng.integers(-100, 100, n)
    s["value"] = rng.standard_normal(n)
    s["count"] = rng.integers(-5, 5, n)
    total = np.full(n, np.nan)
    weigh(-(-n // 128), 128, s, total)
    # value * count + tag may be one fused multiply-add in the kernel: equal to the last bit or so
    np.testing.assert_allclose(total, s["value"] * s["count"] + s["tag"], rtol=1e-15, atol=1e-15)


def test_a_record_named_like_a_scalar_type_is_refused():
    import ast

    from buildtile.backends.simt.records import module_records

    source = "from buildtile import simt\nfrom buildtile.types import f32\n\n@simt.record\nclass i64:\n    x: f32\n"
    records, diags = module_records(ast.parse(source), {"simt": "buildtile.simt", "f32": "buildtile.types.f32"},
                                    "m.py", source.splitlines())
    assert records == {} and [d.code for d in diags] == ["BT0308"]
    assert "has the name of a scalar type" in diags[0].message
