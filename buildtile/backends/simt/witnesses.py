"""The values a SIMT typer turns into ThreadIndex witnesses beyond ``index_Nd()``.

A mixin of the SIMT kernel typer: the spelled-out ``thread_idx.x + block_idx.x *
block_dim.x`` (the 1-D witness; with the same form along y, and z, the components
of a 2-D, 3-D one, as CUDA C++ writes ``col`` and ``row``), and a witness (or one
component of a 2-D/3-D one, or a copy of it) stepped only by the grid's total
threads along its axis (a grid-stride loop). ``simt.ownership`` says why each is
this thread's own; this module only recognises the forms, through the stable
locals (names bound once) the typer records. What one typing pass learns
(``WitnessHints``) the next one uses.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from buildtile.backends.simt import ir
from buildtile.backends.simt.types import WitnessT

#: the thread-geometry values of ``simt``
GEOMETRY = {"thread_idx", "block_idx", "block_dim", "grid_dim"}


def grid_axis(witness: WitnessT) -> str:
    """The grid axis a witness component runs along: the last component of ``index_Nd()`` along x."""
    return "xyz"[witness.dims - 1 - witness.axis]


def grid_total_spelling(witness: WitnessT) -> str:
    """How a kernel writes the grid's total threads along ``witness``'s axis."""
    if witness.dims == 1:
        return "simt.gridsize(1)"
    axis = grid_axis(witness)
    return f"simt.grid_dim.{axis} * simt.block_dim.{axis}"


@dataclass(frozen=True)
class WitnessHints:
    """What a typing pass learnt of a kernel's thread indices, for the next pass to use."""

    #: 2 or 3 when the kernel spells out its index along y (or z) too: the spelled-out indices are
    #: then the components of a 2-D (3-D) witness; None: the spelled-out x index is 1-D
    spelled_dims: int | None = None
    #: copies of a witness (`opt = tid`) whose every later binding steps them by the grid's total
    #: threads along their axis (`opt += thread_n`): witnesses too
    stepped_copies: frozenset[str] = frozenset()


class WitnessForms:
    """Recognises the witness forms; mixed into the kernel typer, whose ``stable``, ``params``,
    ``assign_counts``, ``binding_sites``, ``multi_dim``, ``calls_index``, ``hints``,
    ``spelled_axes``, ``stride_steps`` and ``index_dims`` it uses."""

    def resolved(self, e: ir.Expr) -> ir.Expr:
        """``e``, or the value of the stable local it reads."""
        while isinstance(e, ir.Var) and e.name in self.stable:
            e = self.stable[e.name]
        return e

    def geometry(self, e: ir.Expr) -> str | None:
        """``"thread_idx.x"`` ... when ``e`` is that geometry value."""
        e = self.resolved(e)
        return e.name if isinstance(e, ir.Intrinsic) and e.name.split(".")[0] in GEOMETRY else None

    def grid_total_axis(self, e: ir.Expr) -> str | None:
        """``"x"``, ``"y"`` or ``"z"`` when ``e`` is the grid's total threads along that axis:
        ``grid_dim.a * block_dim.a`` in either order (``simt.gridsize(n)`` is spelled so)."""
        e = self.resolved(e)
        if not (isinstance(e, ir.BinOp) and e.op == "*"):
            return None
        lhs, rhs = self.geometry(e.lhs), self.geometry(e.rhs)
        for grid, block in ((lhs, rhs), (rhs, lhs)):
            if grid and block and grid.startswith("grid_dim.") and block == "block_dim." + grid[-1]:
                return grid[-1]
        return None

    def grid_stride_step(self, name: str, local, value: ir.Expr) -> bool:
        """``i += <grid's total threads along i's axis>`` of a witness: ``i`` stays in this thread's
        residue class modulo the total threads along that axis, which no other thread's index enters."""
        if not (isinstance(local.ty, WitnessT) and isinstance(value, ir.BinOp) and value.op == "+"):
            return False
        for own, step in ((value.lhs, value.rhs), (value.rhs, value.lhs)):
            if (isinstance(own, ir.Var) and own.name == name
                    and self.grid_total_axis(step) == grid_axis(local.ty)):
                return True
        return False

    def grid_stride_range(self, name: str, start: ir.Expr, step: ir.Expr) -> bool:
        """``for name in range(<witness>, n, <grid's total threads along its axis>)``, the loop its
        only binding."""
        return (isinstance(start.ty, WitnessT) and self.grid_total_axis(step) == grid_axis(start.ty)
                and self.assign_counts.get(name, 0) == 2 and name not in self.params)

    def binop(self, op: str, lhs: ir.Expr, rhs: ir.Expr, node: ast.AST, lnode: ast.AST, rnode: ast.AST) -> ir.Expr:
        result = super().binop(op, lhs, rhs, node, lnode, rnode)
        axis = self.spelled_index_axis(lhs, rhs) if op == "+" and not self.multi_dim else None
        if axis is None:
            return result
        self.spelled_axes.add(axis)
        dims = self.hints.spelled_dims
        if dims is None and axis == "x":
            self.index_dims.add(1)
            return ir.ThreadIndex(WitnessT(1, 0), dims=1, src=node)
        if dims is not None:
            # the kernel spells its index along y (or z) too: each is a component of index_Nd()
            self.index_dims.add(dims)
            return ir.ThreadIndex(WitnessT(dims, dims - 1 - "xyz".index(axis)), dims=dims, src=node)
        return result

    def spelled_index_axis(self, lhs: ir.Expr, rhs: ir.Expr) -> str | None:
        """The axis ``a`` of ``thread_idx.a + block_idx.a * block_dim.a`` (terms and factors in any
        order), or None."""
        for tid, base in ((lhs, rhs), (rhs, lhs)):
            along = self.geometry(tid)
            base = self.resolved(base)
            if (along and along.startswith("thread_idx.") and isinstance(base, ir.BinOp) and base.op == "*"
                    and {self.geometry(base.lhs), self.geometry(base.rhs)}
                    == {"block_idx." + along[-1], "block_dim." + along[-1]}):
                return along[-1]
        return None

    def witness_hints(self) -> WitnessHints:
        """What this pass learnt: the dimensions of the spelled-out index (of a kernel that calls no
        ``index_Nd()``, and not of a device function, which does not see its caller's index), and
        the copies of a witness stepped only by the grid's total threads (every binding but the
        copy a step)."""
        spelled = None
        if self.device_fn is None and not self.calls_index and self.spelled_axes - {"x"}:
            spelled = 3 if "z" in self.spelled_axes else 2
        stepped = frozenset(name for name, steps in self.stride_steps.items()
                            if steps == self.binding_sites.get(name, 0) - 1)
        return WitnessHints(spelled or self.hints.spelled_dims, stepped | self.hints.stepped_copies)
