"""The must-fail and must-pass SIMT kernel corpus under tests/ui/.

Each must-fail file starts with ``# expect: CODE line:col [CODE line:col ...]``
naming every diagnostic it must produce, and has a ``.stderr`` snapshot of
their full rendering next to it (see ui_corpus.py; ``BUILDTILE_BLESS=1``
rewrites the snapshots). Must-pass files must check clean and lower to LLVM
IR, PTX and a cubin for every default target.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from buildtile.backend import CompileOptions
from buildtile.check import check_file
from buildtile.diagnostics import render_all
from buildtile.discovery import KernelModule, find_kernels
from buildtile.interop.abi import mangle
from buildtile.plugins import backends
from buildtile.toolchain.nvjitlink import ptx_to_cubin
from ui_corpus import (
    ROOT, UI, assert_defines_kernel, assert_matches_snapshot, assert_renders_like_rustc,
    default_targets, expected, orphan_snapshots,
)

FAIL = sorted((UI / "fail").glob("*.py"))
PASS = sorted((UI / "pass").glob("*.py"))


@pytest.mark.parametrize("path", FAIL, ids=lambda p: p.stem)
def test_must_fail_kernel_reports_expected_diagnostics(path):
    want = expected(path)
    found, diags = check_file(path, ROOT)
    assert found >= 1 or [c for c, _, _ in want] == ["BT0001"], "the file defines no kernel"
    assert [(d.code, d.span.line, d.span.col + 1) for d in diags] == want


@pytest.mark.parametrize("path", FAIL, ids=lambda p: p.stem)
def test_must_fail_kernel_renders_as_its_snapshot(path):
    _, diags = check_file(path, ROOT)
    assert_matches_snapshot(path, render_all(diags) + "\n")


@pytest.mark.parametrize("path", FAIL, ids=lambda p: p.stem)
def test_every_diagnostic_renders_like_rustc(path):
    _, diags = check_file(path, ROOT)
    source = path.read_text().splitlines()
    for diag in diags:
        assert_renders_like_rustc(diag, f"tests/ui/fail/{path.name}", source)


def test_no_snapshot_outlives_its_kernel():
    assert orphan_snapshots(UI / "fail") == []


def test_corpus_covers_the_ownership_codes():
    codes = {c for p in FAIL for c, _, _ in expected(p)}
    assert {"BT0594", "BT0499", "BT0308", "BT0384", "BT0425", "BT0200", "BT0600", "BT0133"} <= codes


@functools.cache
def checked(path: Path) -> tuple:
    """``check_file`` of a must-pass file: the same for every target, so made once."""
    return check_file(path, ROOT)


@pytest.mark.parametrize("target", default_targets())
@pytest.mark.parametrize("path", PASS, ids=lambda p: p.stem)
def test_must_pass_kernel_checks_clean_and_lowers(path, target):
    found, diags = checked(path)
    assert found >= 1 and diags == []
    registry = backends()
    options = CompileOptions()
    for src in find_kernels(KernelModule(path.stem, path.resolve()), registry, UI):
        impl = registry[src.kind].impl
        kernel = impl.analyze(src, options)
        assert_defines_kernel(impl.llvm_ir(kernel, options), kernel.symbol)
        ptx = impl.to_ptx(kernel, target, options)
        assert f".target {target}" in ptx and f".entry {mangle(path.stem, src.name)}(" in ptx
        assert ptx_to_cubin(ptx, target)[:4] == b"\x7fELF"
