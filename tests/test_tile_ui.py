"""The Tile track's must-fail and must-pass corpus under tests/ui/tile/.

Like tests/test_ui.py for SIMT: each must-fail file starts with
``# expect: CODE line:col [...]`` naming every diagnostic it must produce;
must-pass files must check clean and every specialization must lower to a
cubin.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from buildtile.backend import CompileOptions
from buildtile.check import check_file
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends
from buildtile.toolchain.nvjitlink import ptx_to_cubin
from ui_corpus import expected

ROOT = Path(__file__).parent.parent
UI = Path(__file__).parent / "ui" / "tile"
FAIL = sorted((UI / "fail").glob("*.py"))
PASS = sorted((UI / "pass").glob("*.py"))


@pytest.mark.parametrize("path", FAIL, ids=lambda p: p.stem)
def test_must_fail_tile_kernel_reports_expected_diagnostics(path):
    found, diags = check_file(path, ROOT)
    assert found >= 1, "the file defines no kernel"
    assert [(d.code, d.span.line, d.span.col + 1) for d in diags] == expected(path)


@pytest.mark.parametrize("path", FAIL, ids=lambda p: p.stem)
def test_tile_diagnostic_renders_like_rustc(path):
    _, diags = check_file(path, ROOT)
    text = diags[0].render()
    code, line, col = expected(path)[0]
    lines = text.splitlines()
    assert lines[0].startswith(f"error[{code}]: ")
    assert f"--> tests/ui/tile/fail/{path.name}:{line}:{col}" in lines[1]
    assert f"{line} | {path.read_text().splitlines()[line - 1]}" in text
    if code in {"BT0499", "BT0594"}:
        assert "= help: " in text, "ownership errors say how to fix them"


def test_tile_corpus_covers_the_ownership_codes():
    codes = {c for p in FAIL for c, _, _ in expected(p)}
    assert {"BT0499", "BT0594", "BT0308", "BT0425", "BT0200", "BT0600"} <= codes


def test_a_diagnostic_of_one_specialization_names_it():
    _, diags = check_file(UI / "fail" / "error_in_one_specialization.py", ROOT)
    assert diags[0].notes == ("in the specialization z: [1024]",)
    assert "= note: in the specialization z: [1024]" in diags[0].render()


@pytest.mark.parametrize("path", PASS, ids=lambda p: p.stem)
def test_must_pass_tile_kernel_checks_clean_and_lowers(path):
    found, diags = check_file(path, ROOT)
    assert found >= 1 and diags == []
    registry = backends()
    impl = registry["tile"].impl
    for src in find_kernels(KernelModule(path.stem, path.resolve()), registry, UI):
        kernel = impl.analyze(src, CompileOptions())
        for spec in impl.specializations(kernel):
            ptx = impl.to_ptx(kernel, "sm_80", CompileOptions(), specialization=spec)
            assert f".entry {spec.symbol}(" in ptx
            assert ptx_to_cubin(ptx, "sm_80")[:4] == b"\x7fELF"
