"""What the UI runners share: the header grammar of a must-fail file and its ``.stderr`` snapshot.

A must-fail file's first line names every diagnostic it must produce, in order:

    # expect: CODE line:col [CODE line:col ...]

(CODE is ``BT`` and four digits; line and column are 1-based). A line that does
not match this grammar exactly is refused, so a typo cannot silently expect
nothing. Next to ``foo.py`` lies ``foo.stderr``: the full rendering of every
diagnostic (message, caret, labels, notes, help), compared exactly. Running
the tests with ``BUILDTILE_BLESS=1`` rewrites the snapshots instead, as
trybuild's ``TRYBUILD=overwrite`` does; review the diff before committing.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import pytest

from buildtile.config import BuildtileSettings

ROOT = Path(__file__).parent.parent
UI = Path(__file__).parent / "ui"
HEADER = re.compile(r"# expect:((?: BT\d{4} [1-9]\d*:[1-9]\d*)+)")
BLESS = "BUILDTILE_BLESS"


def expected(path: Path) -> list[tuple[str, int, int]]:
    """Every diagnostic the file must produce: (code, 1-based line, 1-based column)."""
    lines = path.read_text().splitlines()
    header = lines[0] if lines else ""
    match = HEADER.fullmatch(header)
    if match is None:
        pytest.fail(f"{path.name}: the first line {header!r} is not `# expect: CODE line:col [CODE line:col ...]`",
                    pytrace=False)
    return [(c, int(l), int(col)) for c, l, col in re.findall(r"(BT\d{4}) (\d+):(\d+)", match.group(1))]


def snapshot_of(path: Path) -> Path:
    return path.with_suffix(".stderr")


def assert_matches_snapshot(path: Path, rendered: str) -> None:
    """``rendered`` must equal ``path``'s ``.stderr`` file; with BUILDTILE_BLESS=1, becomes it."""
    snapshot = snapshot_of(path)
    if os.environ.get(BLESS) == "1":
        if not snapshot.exists() or snapshot.read_text() != rendered:
            snapshot.write_text(rendered)
        return
    if not snapshot.exists():
        pytest.fail(f"{snapshot.relative_to(ROOT)} is missing; run with {BLESS}=1 to write it:\n{rendered}",
                    pytrace=False)
    want = snapshot.read_text()
    if want != rendered:
        diff = "".join(difflib.unified_diff(want.splitlines(keepends=True), rendered.splitlines(keepends=True),
                                            f"{snapshot.name} (expected)", f"{snapshot.name} (got)"))
        pytest.fail(f"the diagnostics of {path.relative_to(ROOT)} differ from {snapshot.relative_to(ROOT)} "
                    f"(run with {BLESS}=1 to accept them):\n{diff}", pytrace=False)


def orphan_snapshots(folder: Path) -> list[Path]:
    """Snapshots whose kernel file is gone: stale, and compared against nothing."""
    return [s for s in sorted(folder.glob("*.stderr")) if not s.with_suffix(".py").exists()]


def default_targets() -> list[str]:
    """The targets a project builds for when it names none."""
    return list(BuildtileSettings().targets)


def assert_renders_like_rustc(diag, display_file: str, source: list[str]) -> None:
    """The shape rustc prints, whatever the words: `error[CODE]: ...`, `--> file:line:col`,
    the source line, and carets under the span (the snapshot then pins the words)."""
    span = diag.span
    lines = diag.render().splitlines()
    assert lines[0].startswith(f"error[{diag.code}]: {diag.message}")
    gutter = " " * len(str(span.line))
    assert lines[1] == f"{gutter}--> {display_file}:{span.line}:{span.col + 1}"
    assert lines[3] == f"{span.line} | {source[span.line - 1]}"
    caret = lines[4].split("|", 1)[1][1:]
    assert caret[:span.col].strip() == "" and caret[span.col] == "^", "caret under the offending column"
    if diag.code in {"BT0499", "BT0594", "BT0384"}:
        assert f"{gutter} = help: " in diag.render(), "ownership errors say how to fix them"


def assert_defines_kernel(llvm_ir: str, symbol: str) -> None:
    """``llvm_ir`` parses, verifies and defines the kernel ``symbol``."""
    import llvmlite.binding as llvm

    module = llvm.parse_assembly(llvm_ir)
    module.verify()
    assert not module.get_function(symbol).is_declaration, f"{symbol} is only declared"
