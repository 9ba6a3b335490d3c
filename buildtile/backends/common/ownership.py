"""The diagnostics of an ownership check, the same for every kernel language."""

from __future__ import annotations

import ast

from buildtile.backend import KernelSource
from buildtile.diagnostics import Diagnostic, Span


class OwnershipReport:
    """Collects one kernel's ownership diagnostics, each place and code once."""

    def __init__(self, source: KernelSource) -> None:
        self.source = source
        self.diagnostics: list[Diagnostic] = []

    def report(self, code: str, node: ast.AST, message: str, label: str, help: str) -> None:
        span = Span.of(node, self.source.display_file, self.source.lines)
        if any(d.code == code and d.span == span for d in self.diagnostics):
            return   # `c[i + 1] += v` reads and writes one place: one error is enough
        self.diagnostics.append(Diagnostic(code, message, span, label=label, help=help))
