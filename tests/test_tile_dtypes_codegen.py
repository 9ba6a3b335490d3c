"""The PTX of the element types and expression forms of Tile kernels: every kernel of
tests/tile_dtype_cases.py links to a cubin, and the instructions that carry a rule are there
(arithmetic shifts for signed types, logical ones for unsigned, a shift by a run-time
amount, an integer condition compared with zero, a run-time loop step)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
import tile_dtype_cases as cases

from buildtile.backend import CompileOptions
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends
from buildtile.toolchain.nvjitlink import ptx_to_cubin

IMPL = backends()["tile"].impl
OPTIONS = CompileOptions()


def compiled(tmp: Path, text: str, name: str = "kernels") -> dict[str, str]:
    """PTX (sm_90) of every kernel in ``text``, by kernel name."""
    path = tmp / f"{name}.py"
    path.write_text(text)
    out = {}
    for src in find_kernels(KernelModule(name, path), backends(), tmp):
        kernel = IMPL.analyze(src, OPTIONS)
        (spec,) = IMPL.specializations(kernel)
        out[src.name] = IMPL.to_ptx(kernel, "sm_90", OPTIONS, specialization=spec)
    return out


@pytest.fixture(scope="module")
def dtype_ptx(tmp_path_factory) -> dict[str, str]:
    return compiled(tmp_path_factory.mktemp("dtype_ptx"), cases.source())


def test_every_dtype_kernel_links_to_cubin(dtype_ptx):
    assert len(dtype_ptx) == 2 * len(cases.DTYPES) + len(cases.INTS) + len(cases.FLOATS) + 4
    for name, ptx in dtype_ptx.items():
        assert ptx_to_cubin(ptx, "sm_90")[:4] == b"\x7fELF", name


@pytest.mark.parametrize("dtype,shr", [("i32", "shr.s32"), ("u32", "shr.u32"), ("i64", "shr.s64")])
def test_right_shift_is_arithmetic_for_signed_and_logical_for_unsigned(tmp_path, dtype, shr):
    ptx = compiled(tmp_path, textwrap.dedent(f"""
        from buildtile import tile
        from buildtile.types import Tensor, {dtype}

        @tile.kernel(specialize=[{{"z": [256]}}])
        def shifts(x: Tensor[{dtype}, 1], z: tile.Out[{dtype}, 1]):
            t = tile.load_like(x, z)
            z.store((t >> 3) ^ (t << 2))
        """))["shifts"]
    assert re.search(rf"\b{re.escape(shr)}\b[^;]*, 3;", ptx)
    assert re.search(r"\bshl\.b(32|64)\b[^;]*, 2;", ptx)


def test_a_run_time_shift_amount_shifts_by_a_register(tmp_path):
    ptx = compiled(tmp_path, textwrap.dedent("""
        from buildtile import tile
        from buildtile.types import Tensor, u32

        @tile.kernel(specialize=[{"z": [256]}])
        def by_tile(x: Tensor[u32, 1], s: Tensor[u32, 1], z: tile.Out[u32, 1]):
            z.store(tile.load_like(x, z) << tile.load_like(s, z))
        """))["by_tile"]
    # PTX clamps a shift amount to the width, which is the rule for amounts of 32 or more:
    # LLVM drops the kernel's range test and shifts by the register
    assert re.search(r"\bshl\.b32\s+%r\d+, %r\d+, %r\d+;", ptx), "a shift by a register"


def test_an_integer_condition_is_compared_with_zero(tmp_path):
    ptx = compiled(tmp_path, textwrap.dedent("""
        from buildtile import tile
        from buildtile.types import Tensor, f32, i32

        @tile.kernel(specialize=[{"z": [256]}])
        def choose(x: Tensor[f32, 1], m: Tensor[i32, 1], z: tile.Out[f32, 1]):
            t = tile.load_like(x, z)
            z.store(tile.where(tile.load_like(m, z), t, -t))
        """))["choose"]
    assert re.search(r"setp\.(ne|eq)\.[bsu]32[^;]*, 0;", ptx)


def test_a_run_time_loop_step_is_added_from_a_register(tmp_path):
    ptx = compiled(tmp_path, textwrap.dedent("""
        from buildtile import tile
        from buildtile.types import f32, i64

        @tile.kernel(specialize=[{"z": [256]}])
        def count(n: i64, step: i64, z: tile.Out[f32, 1]):
            acc = tile.zeros((256,), f32)
            for i in tile.range(0, n, step):
                acc += 1.0
            z.store(acc)
        """))["count"]
    assert re.search(r"add\.s64\s+%rd\d+, %rd\d+, %rd\d+;", ptx)
    assert re.search(r"setp\.(gt|lt|ge|le)\.s64[^;]*, 0;", ptx), "the step's sign picks the test"
