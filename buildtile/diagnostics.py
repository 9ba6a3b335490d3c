"""One diagnostic value and one renderer, in the shape rustc prints.

Every check produces :class:`Diagnostic` values; nothing else formats error
text for kernels.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Span:
    """A source range: 1-based line, 0-based columns (as Python's ``ast``)."""

    file: str
    line: int
    col: int
    end_col: int | None = None
    source_line: str = ""

    @classmethod
    def of(cls, node: ast.AST, file: str, lines: list[str]) -> Span:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        end_line = getattr(node, "end_lineno", line)
        end_col = getattr(node, "end_col_offset", None) if end_line == line else None
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        return cls(file, line, col, end_col, text)


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    span: Span | None
    label: str = ""
    help: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    severity: str = "error"

    def render(self) -> str:
        return render(self)


def render(diag: Diagnostic) -> str:
    out = [f"{diag.severity}[{diag.code}]: {diag.message}"]
    span = diag.span
    if span is not None:
        gutter = " " * len(str(span.line))
        out.append(f"{gutter}--> {span.file}:{span.line}:{span.col + 1}")
        out.append(f"{gutter} |")
        text = span.source_line.rstrip("\n")
        out.append(f"{span.line} | {text}")
        width = max(1, (span.end_col or len(text)) - span.col)
        caret = " " * span.col + "^" * width
        out.append(f"{gutter} | {caret}" + (f" {diag.label}" if diag.label else ""))
        if diag.help or diag.notes:
            out.append(f"{gutter} |")
    for note in diag.notes:
        out.append(f"{' ' * (len(str(span.line)) if span else 0)} = note: {note}")
    if diag.help:
        out.append(f"{' ' * (len(str(span.line)) if span else 0)} = help: {diag.help}")
    return "\n".join(out)


def unique(diags: list[Diagnostic]) -> list[Diagnostic]:
    """Drop repeats (a helper shared by two kernels reports its error once), keeping order."""
    seen, out = set(), []
    for d in diags:
        key = (d.code, d.message, d.span)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def render_all(diags: list[Diagnostic]) -> str:
    text = "\n\n".join(render(d) for d in diags)
    errors = sum(1 for d in diags if d.severity == "error")
    if errors > 1:
        text += f"\n\nerror: aborting due to {errors} previous errors"
    return text
