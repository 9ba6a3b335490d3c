"""The diagnostics of an ownership check, the same for every kernel language."""

from __future__ import annotations

import ast

from buildtile.backend import KernelSource
from buildtile.backends.common import ir
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


def why_not_own(idx: ir.Expr, own: str, element: str, owner: str) -> str:
    """Why ``idx`` does not prove that this ``owner`` (thread, block) owns the ``element`` it names;
    ``own`` spells the index that would (``a ThreadIndex``, ```z.tile_id(0)```)."""
    if isinstance(idx, ir.Const):
        return f"a constant index names the same {element} in every {owner}"
    if isinstance(idx, (ir.BinOp, ir.UnaryOp, ir.Cast)):
        return f"arithmetic on {own} names {element}s another {owner} owns"
    if isinstance(idx, ir.Var):
        return f"`{idx.name}` is a plain integer, not {own}"
    return f"this index is not {own}"
