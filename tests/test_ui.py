"""The must-fail and must-pass kernel corpus under tests/ui/.

Each must-fail file starts with ``# expect: CODE line:col [CODE line:col ...]``
naming every diagnostic it must produce; must-pass files must check clean
and lower to PTX.
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

UI = Path(__file__).parent / "ui"
FAIL = sorted((UI / "fail").glob("*.py"))
PASS = sorted((UI / "pass").glob("*.py"))


@pytest.mark.parametrize("path", FAIL, ids=lambda p: p.stem)
def test_must_fail_kernel_reports_expected_diagnostics(path):
    found, diags = check_file(path, UI.parent.parent)
    assert found >= 1, "the file defines no kernel"
    got = [(d.code, d.span.line, d.span.col + 1) for d in diags]
    assert got == expected(path)


@pytest.mark.parametrize("path", FAIL, ids=lambda p: p.stem)
def test_diagnostic_renders_like_rustc(path):
    _, diags = check_file(path, UI.parent.parent)
    text = diags[0].render()
    code, line, col = expected(path)[0]
    lines = text.splitlines()
    assert lines[0].startswith(f"error[{code}]: ")
    assert f"--> tests/ui/fail/{path.name}:{line}:{col}" in lines[1]
    source_line = path.read_text().splitlines()[line - 1]
    assert f"{line} | {source_line}" in text
    caret = next(l for l in lines if set(l.split("|", 1)[-1].strip().split(" ")[0]) == {"^"})
    assert caret.index("^") - caret.index("|") - 2 == col - 1, "caret under the offending column"
    if code in {"BT0499", "BT0594", "BT0384"}:
        assert "\n   = help: " in text or "\n  = help: " in text, "ownership errors say how to fix them"


def test_corpus_covers_every_build_time_code():
    codes = {c for p in FAIL for c, _, _ in expected(p)}
    assert {"BT0594", "BT0499", "BT0308", "BT0384", "BT0425", "BT0200", "BT0600"} <= codes


@pytest.mark.parametrize("path", PASS, ids=lambda p: p.stem)
def test_must_pass_kernel_checks_clean_and_lowers(path):
    found, diags = check_file(path, UI.parent.parent)
    assert found >= 1 and diags == []
    registry = backends()
    for src in find_kernels(KernelModule(path.stem, path.resolve()), registry, UI):
        impl = registry[src.kind].impl
        ptx = impl.to_ptx(impl.analyze(src, CompileOptions()), "sm_80", CompileOptions())
        assert f".entry {path.stem}__{src.name}(" in ptx
        assert ptx_to_cubin(ptx, "sm_80")[:4] == b"\x7fELF"
