"""The values a SIMT typer turns into ThreadIndex witnesses beyond ``index_Nd()``.

A mixin of the SIMT kernel typer: the spelled-out ``thread_idx.x + block_idx.x *
block_dim.x`` (the 1-D witness), and a 1-D witness stepped only by the grid's
total threads (a grid-stride loop). ``simt.ownership`` says why each is this
thread's own; this module only recognises the forms, through the stable locals
(names bound once) the typer records.
"""

from __future__ import annotations

import ast

from buildtile.backends.simt import ir
from buildtile.backends.simt.types import WitnessT

#: the thread-geometry values of ``simt``
GEOMETRY = {"thread_idx", "block_idx", "block_dim", "grid_dim"}


class WitnessForms:
    """Recognises the witness forms; mixed into the kernel typer, whose ``stable``, ``params``,
    ``assign_counts``, ``multi_dim`` and ``index_dims`` it reads."""

    def resolved(self, e: ir.Expr) -> ir.Expr:
        """``e``, or the value of the stable local it reads."""
        while isinstance(e, ir.Var) and e.name in self.stable:
            e = self.stable[e.name]
        return e

    def geometry(self, e: ir.Expr) -> str | None:
        """``"thread_idx.x"`` ... when ``e`` is that geometry value."""
        e = self.resolved(e)
        return e.name if isinstance(e, ir.Intrinsic) and e.name.split(".")[0] in GEOMETRY else None

    def is_grid_total(self, e: ir.Expr) -> bool:
        """``e`` is the grid's total threads along x: ``grid_dim.x * block_dim.x`` in either order
        (``simt.gridsize(1)`` is spelled so)."""
        e = self.resolved(e)
        return (isinstance(e, ir.BinOp) and e.op == "*"
                and {self.geometry(e.lhs), self.geometry(e.rhs)} == {"grid_dim.x", "block_dim.x"})

    def grid_stride_step(self, name: str, local, value: ir.Expr) -> bool:
        """``i += <grid's total threads>`` of a 1-D witness: ``i`` stays in this thread's residue
        class modulo the total threads, which no other thread's index enters."""
        if not (isinstance(local.ty, WitnessT) and local.ty.dims == 1 and isinstance(value, ir.BinOp)
                and value.op == "+"):
            return False
        for own, step in ((value.lhs, value.rhs), (value.rhs, value.lhs)):
            if isinstance(own, ir.Var) and own.name == name and self.is_grid_total(step):
                return True
        return False

    def grid_stride_range(self, name: str, start: ir.Expr, step: ir.Expr) -> bool:
        """``for name in range(<1-D witness>, n, <grid's total threads>)``, the loop its only binding."""
        return (start.ty == WitnessT(1, 0) and self.is_grid_total(step)
                and self.assign_counts.get(name, 0) == 2 and name not in self.params)

    def binop(self, op: str, lhs: ir.Expr, rhs: ir.Expr, node: ast.AST, lnode: ast.AST, rnode: ast.AST) -> ir.Expr:
        result = super().binop(op, lhs, rhs, node, lnode, rnode)
        if op == "+" and not self.multi_dim and self.spells_index_1d(lhs, rhs):
            self.index_dims.add(1)
            return ir.ThreadIndex(WitnessT(1, 0), dims=1, src=node)
        return result

    def spells_index_1d(self, lhs: ir.Expr, rhs: ir.Expr) -> bool:
        """``thread_idx.x + block_idx.x * block_dim.x``, the terms and factors in any order."""
        for tid, base in ((lhs, rhs), (rhs, lhs)):
            base = self.resolved(base)
            if (self.geometry(tid) == "thread_idx.x" and isinstance(base, ir.BinOp) and base.op == "*"
                    and {self.geometry(base.lhs), self.geometry(base.rhs)} == {"block_idx.x", "block_dim.x"}):
                return True
        return False

