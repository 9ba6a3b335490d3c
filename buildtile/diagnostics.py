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

    def render(self, color: bool = False) -> str:
        return render(self, color=color)


#: ANSI styles of a coloured rendering, as rustc colours its diagnostics
STYLES = {
    "error": "1;31",       # bold red: the severity, and the carets under an error
    "warning": "1;33",     # bold yellow
    "note": "1;32",        # bold green
    "help": "1;36",        # bold cyan
    "gutter": "1;34",      # bold blue: line numbers, `-->`, `|`, `=`
    "message": "1",        # bold: the headline
}


def _painter(color: bool):
    if not color:
        return lambda text, style: text
    return lambda text, style: f"\x1b[{STYLES[style]}m{text}\x1b[0m" if text else text


def render(diag: Diagnostic, color: bool = False) -> str:
    """``diag`` as rustc prints one; ``color`` adds ANSI colours (for a terminal)."""
    paint = _painter(color)
    level = diag.severity if diag.severity in STYLES else "error"
    out = [paint(f"{diag.severity}[{diag.code}]", level) + paint(f": {diag.message}", "message")]
    span = diag.span
    if span is not None:
        gutter = " " * len(str(span.line))
        bar = paint("|", "gutter")
        out.append(f"{gutter}{paint('-->', 'gutter')} {span.file}:{span.line}:{span.col + 1}")
        out.append(f"{gutter} {bar}")
        text = span.source_line.rstrip("\n")
        out.append(f"{paint(str(span.line), 'gutter')} {bar} {text}")
        width = max(1, (span.end_col or len(text)) - span.col)
        caret = " " * span.col + paint("^" * width + (f" {diag.label}" if diag.label else ""), level)
        out.append(f"{gutter} {bar} {caret}")
        if diag.help or diag.notes:
            out.append(f"{gutter} {bar}")
    indent = " " * (len(str(span.line)) if span else 0)
    for note in diag.notes:
        out.append(f"{indent} {paint('=', 'gutter')} {paint('note', 'note')}: {note}")
    if diag.help:
        out.append(f"{indent} {paint('=', 'gutter')} {paint('help', 'help')}: {diag.help}")
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


def render_all(diags: list[Diagnostic], color: bool = False) -> str:
    text = "\n\n".join(render(d, color=color) for d in diags)
    errors = sum(1 for d in diags if d.severity == "error")
    if errors > 1:
        text += "\n\n" + _painter(color)("error", "error") + f": aborting due to {errors} previous errors"
    return text
