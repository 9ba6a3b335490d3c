"""Every scalar expression form means the same in SIMT and Tile kernels.

Each file under tests/ui/scalar/ is a kernel body written once: it may read the
scalar parameters ``n: i64, m: i32, u: u32, x: f32, y: f64`` and the index
``i``, and binds ``r``. A template wraps it in a SIMT kernel and in a Tile
kernel, at the same lines and columns. Must-pass bodies build to PTX in both;
must-fail bodies (``# expect: CODE line:col``, a place in the body file) give
the same diagnostics, at the same place, in both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from buildtile.backend import CompileOptions
from buildtile.check import check_file
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends
from ui_corpus import expected

SCALAR = Path(__file__).parent / "ui" / "scalar"
PASS = sorted((SCALAR / "pass").glob("*.py"))
FAIL = sorted((SCALAR / "fail").glob("*.py"))

PARAMS = "n: i64, m: i32, u: u32, x: f32, y: f64"
TEMPLATES = {
    "simt": (
        "import math\n\n"
        "from buildtile import simt\n"
        "from buildtile.types import DisjointSlice, bf16, bool_, f16, f32, f64, i32, i64, u32, u64\n\n\n"
        "@simt.kernel(block=128)\n"
        f"def scalar_form(out: DisjointSlice[f32], {PARAMS}):\n"
        "    i = simt.index_1d()\n"
        "{body}"
        "    out[i] = f32(r)\n"
    ),
    "tile": (
        "import math\n\n"
        "from buildtile import tile\n"
        "from buildtile.types import bf16, bool_, f16, f32, f64, i32, i64, u32, u64\n\n\n"
        '@tile.kernel(specialize=[{{"out": [128]}}])\n'
        f"def scalar_form(out: tile.Out[f32, 1], {PARAMS}):\n"
        "    i = out.tile_id(0)\n"
        "{body}"
        "    out.store(tile.full(out.tile_shape, f32(r), f32))\n"
    ),
}
#: the template lines above the body; a body is indented by four columns
BODY_LINE = 10
BODY_COLUMN = 4
LANGUAGES = sorted(TEMPLATES)


def kernel_file(case: Path, language: str, tmp_path: Path) -> Path:
    body = "".join(f"    {line}\n" for line in case.read_text().splitlines())
    text = TEMPLATES[language].format(body=body)
    assert text.splitlines()[BODY_LINE - 1] == "    " + case.read_text().splitlines()[0]
    path = tmp_path / f"{language}_{case.stem}.py"
    path.write_text(text)
    return path


def diagnostics(case: Path, language: str, tmp_path: Path) -> list[tuple[str, int, int]]:
    """The (code, line, column) of each diagnostic, as a place in the body file."""
    found, diags = check_file(kernel_file(case, language, tmp_path), tmp_path)
    assert found == 1
    return [(d.code, d.span.line - BODY_LINE + 1, d.span.col + 1 - BODY_COLUMN) for d in diags]


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("case", PASS, ids=lambda p: p.stem)
def test_scalar_form_builds_in_both_languages(case, language, tmp_path):
    path = kernel_file(case, language, tmp_path)
    assert check_file(path, tmp_path) == (1, [])
    registry = backends()
    (src,) = find_kernels(KernelModule(path.stem, path), registry, tmp_path)
    impl = registry[src.kind].impl
    kernel = impl.analyze(src, CompileOptions())
    extra = {"specialization": impl.specializations(kernel)[0]} if language == "tile" else {}
    ptx = impl.to_ptx(kernel, "sm_80", CompileOptions(), **extra)
    assert ".entry " in ptx


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("case", FAIL, ids=lambda p: p.stem)
def test_scalar_form_is_refused_alike_in_both_languages(case, language, tmp_path):
    assert diagnostics(case, language, tmp_path) == expected(case)


def test_refused_power_says_what_to_write(tmp_path):
    for language in LANGUAGES:
        _, diags = check_file(kernel_file(SCALAR / "fail" / "power_augmented.py", language, tmp_path), tmp_path)
        (diag,) = diags
        assert "`**=`" in diag.message
        assert "r = r * r" in diag.help and "math.pow" in diag.help


def test_corpus_covers_both_outcomes_of_the_operators():
    names = {p.stem for p in PASS + FAIL}
    assert {"shifts", "chained_comparison", "constant_folding", "augmented_assignment",
            "power_augmented", "power_of_runtime_value"} <= names


SHIFTS = '''
from buildtile import tile
from buildtile.types import Tensor, i32, i64


@tile.kernel(specialize=[{"z": [128], "w": [128]}])
def shifts(x: Tensor[i32, 1], k: i64, z: tile.Out[i32, 1], w: tile.Out[i64, 1]):
    t = tile.load_like(x, z)
    z.store((t << 3) + (t >> 2) + (t << 31))
    s = k << 5
    s >>= 3
    w.store(tile.full(w.tile_shape, s + (k >> 62), i64))
'''


def test_tile_shifts_match_numpy_on_the_emulator(tmp_path):
    """The tile lowering computes shifts as multiplications and floor divisions: the same bits."""
    import numpy as np
    from buildtile.emulate.direct import TileKernel

    path = tmp_path / "shift_kernels.py"
    path.write_text(SHIFTS)
    registry = backends()
    (src,) = find_kernels(KernelModule("shift_kernels", path), registry, tmp_path)
    impl = registry["tile"].impl
    kernel = impl.analyze(src, CompileOptions())
    run = TileKernel(impl.specializations(kernel)[0], kernel.params)
    x = np.random.default_rng(0).integers(-2**31, 2**31, 300, dtype=np.int32)
    z, w = np.zeros(300, np.int32), np.zeros(300, np.int64)
    for k in (-(2**40) - 3, -5, 7):
        run(x, k, z, w)
        np.testing.assert_array_equal(z, (x << 3) + (x >> 2) + (x << 31))
        kk = np.int64(k)
        np.testing.assert_array_equal(w, np.full(300, ((kk << 5) >> 3) + (kk >> 62)))
