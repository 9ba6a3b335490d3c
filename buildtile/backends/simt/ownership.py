"""Stage 2: ownership and aliasing checks over the typed IR (typed -> checked).

The rules, in the spirit of Rust's borrow checker:

* ``Slice``/``Tensor`` parameters are shared borrows: never written (BT0594).
* ``DisjointSlice``/``DisjointTensor`` are split mutable borrows: a thread
  touches only the element named by its own ThreadIndex witness (BT0499).
  Witness locals are immutable (the typer enforces BT0384), so a ``Var`` of
  witness type here is always the thread's own, unmodified index.
* ``AtomicSlice`` elements change only through atomic methods (BT0594).
* Inside ``with simt.unsafe():`` the programmer vouches for disjointness: a
  disjoint parameter may be indexed by anything there (a block writing its
  tile of a transpose, one result per block). Read-only stays read-only.
"""

from __future__ import annotations

import ast

from buildtile.backend import KernelSource
from buildtile.diagnostics import Diagnostic
from buildtile.backends.common.ownership import OwnershipReport, why_not_own
from buildtile.backends.simt import ir
from buildtile.backends.simt.types import SliceT, TensorT, WitnessT


def check(kernel: ir.KernelIR, source: KernelSource) -> list[Diagnostic]:
    params = {p.name: p.ty for p in kernel.params}
    params.update(kernel.shared)
    checked = OwnershipReport(source)
    report = checked.report
    orders: dict = {}        # disjoint tensor -> (axis order of its first access, where)

    def outside_unsafe(node, what: str) -> None:
        report("BT0133", node, f"{what} requires unsafe",
               "shared memory is outside the safety proof",
               "wrap the code that declares and uses shared memory in `with simt.unsafe():`")

    def visit(stmts: list[ir.Stmt], unsafe: bool) -> None:
        for stmt in stmts:
            if isinstance(stmt, ir.Unsafe):
                visit(stmt.body, True)
                continue
            if isinstance(stmt, ir.SharedDecl) and not unsafe:
                outside_unsafe(stmt.src, "declaring shared memory")
            if isinstance(stmt, ir.Store):
                ty = params[stmt.param]
                if ty.access == "shared":
                    if not unsafe:
                        outside_unsafe(stmt.src, f"writing shared array `{stmt.param}`")
                elif ty.access == "read":
                    report("BT0594", stmt.src, f"cannot assign to `{stmt.param}[...]`, as `{stmt.param}` is read-only",
                           f"`{stmt.param}` is a {ty}",
                           f"declare `{stmt.param}` as {'DisjointSlice' if isinstance(ty, SliceT) else 'DisjointTensor'}"
                           f"[{ty.elem}{'' if isinstance(ty, SliceT) else f', {ty.rank}'}] to write it at this thread's index")
                elif ty.access == "atomic":
                    report("BT0594", stmt.src, f"cannot assign to `{stmt.param}[...]`: AtomicSlice elements change only through atomic operations",
                           "plain store to an AtomicSlice", f"use `{stmt.param}.atomic_exchange(i, v)` or `{stmt.param}.atomic_add(i, v)`")
                elif not unsafe:
                    _check_own_index(stmt.param, ty, stmt.indices, stmt.src, "write", report, orders)
            own_exprs = [v for v in vars(stmt).values()
                         if isinstance(v, ir.Expr) or (isinstance(v, list) and v and isinstance(v[0], ir.Expr))]
            for expr in ir.walk_exprs(own_exprs):
                if isinstance(expr, ir.Load):
                    ty = params[expr.param]
                    if ty.access == "disjoint" and not unsafe:
                        _check_own_index(expr.param, ty, expr.indices, expr.src, "read", report, orders)
                    elif ty.access == "shared" and not unsafe:
                        outside_unsafe(expr.src, f"reading shared array `{expr.param}`")
                elif isinstance(expr, ir.AtomicOp) and params[expr.param].access == "shared" and not unsafe:
                    outside_unsafe(expr.src, f"an atomic on shared array `{expr.param}`")
            for value in vars(stmt).values():
                if isinstance(value, list) and value and isinstance(value[0], ir.Stmt):
                    visit(value, unsafe)

    visit(kernel.body, False)
    return checked.diagnostics


def _check_own_index(name: str, ty, indices: list[ir.Expr], node, verb: str, report, orders: dict) -> None:
    rank = ty.rank if isinstance(ty, TensorT) else 1
    axes = []
    for idx in indices:
        wt = idx.ty if isinstance(idx, (ir.Var, ir.ThreadIndex)) else None
        if not isinstance(wt, WitnessT):
            report("BT0499", idx.src or node, f"index is not this thread's own: cannot {verb} `{name}` here",
                   _why_not_own(idx),
                   f"a {ty} is {_PAST[verb]} only at `{name}[{_own_spelling(rank)}]`, "
                   f"with the names bound by `{_own_call(rank)}`")
            return
        axes.append(wt)
    dims = {w.dims for w in axes}
    if dims != {rank} or len({w.axis for w in axes}) != rank:
        what = "the axis" if rank == 1 else f"all {rank} axes"
        report("BT0499", node, f"index is not this thread's own: cannot {verb} `{name}` here",
               f"`{name}` has rank {rank}, so it takes {what} of `{_own_call(rank)}`{'' if rank == 1 else ' once each'}",
               f"index `{name}` with the names bound by `{_own_call(rank)}`, one per axis")
        return
    # a permutation of the axes is one thread's own element too, but only if every access of
    # the parameter uses the same one: m[row, col] and m[col, row] are different threads' elements
    order = tuple(w.axis for w in axes)
    first = orders.setdefault(name, (order, node))
    if first[0] != order:
        report("BT0499", node, f"index is not this thread's own: `{name}` is indexed with another axis order here",
               f"`{ast.unparse(first[1])}` (line {first[1].lineno}) orders the thread axes otherwise, "
               "so this element belongs to another thread",
               f"index `{name}` with the same order of thread axes everywhere")


def _why_not_own(idx: ir.Expr) -> str:
    if isinstance(idx, ir.Load):
        return "an index read from memory may repeat across threads"
    return why_not_own(idx, "a ThreadIndex", "element", "thread")


def _own_call(rank: int) -> str:
    return f"simt.index_{rank}d()"


def _own_spelling(rank: int) -> str:
    return {1: "i", 2: "row, col", 3: "z, y, x"}[rank]


_PAST = {"write": "written", "read": "read"}
