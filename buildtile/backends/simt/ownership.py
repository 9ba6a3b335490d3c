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

The indices proven to be this thread's own, each an injection from threads
(and their steps) to elements, so no two threads name one element:

* **A witness**: ``simt.index_Nd()``, ``simt.grid(N)`` (the same witnesses,
  x first), and ``thread_idx.x + block_idx.x * block_dim.x`` with its terms
  and factors in any order, which is ``index_1d()`` spelled out (the typer
  makes it one, in kernels that use no 2-D/3-D index). Each is unique per
  thread of a launch of its dimension (the contract and the host enforce it).
* **A grid-stride witness** (the typer proves it): a witness only ever
  stepped by ``i += T``, or ``for i in range(<witness>, n, T)``, where
  ``T`` is the grid's total threads along the witness's axis
  (``grid_dim.x * block_dim.x`` in either order, or ``simt.gridsize(1)``, for
  a 1-D witness or the last component of a 2-D/3-D one; ``.y`` and ``.z`` for
  the others, as ``simt.gridsize(n)`` returns them). Thread ``t < T`` along
  that axis only ever holds ``t + k*T``: its residue class modulo ``T``, which
  no other thread's component enters, so a tuple of such components, one per
  axis, is one thread's own as the witness is. Any other step (``i += 2``,
  ``i += block_dim.x``) is refused.
* **A row-major linearisation** of a 2-D/3-D witness, into a rank-1 view:
  ``row * n + col`` (terms and factors in any order; nested for 3-D:
  ``(z * ny + y) * nx + x``) where every place that reads it is guarded by
  ``col < n`` (an enclosing ``if`` whose condition has it among its ``and``
  terms, or an earlier ``if col >= n: return``), ``n`` being the same
  unchanging value (a scalar parameter, ``len``/``.shape``/``.size``, a
  constant or a local bound once at the top of the body). With
  ``0 <= col < n`` the pair is recovered from the index as
  ``(v // n, v % n)``: the map is injective. Every axis of the witness must
  appear once, and every access of the view must use the same form.
"""

from __future__ import annotations

import ast

from buildtile.backend import KernelSource
from buildtile.diagnostics import Diagnostic
from buildtile.backends.common.ownership import OwnershipReport, why_not_own
from buildtile.backends.simt import ir
from buildtile.backends.simt.types import Scalar, SliceT, TensorT, WitnessT, value_type
from buildtile.backends.simt.witnesses import grid_total_spelling


def check(kernel: ir.KernelIR, source: KernelSource) -> list[Diagnostic]:
    checked = OwnershipReport(source)
    params = {p.name: p.ty for p in kernel.params}
    params.update(kernel.shared)
    _check_body(kernel.body, params, checked.report, None)
    for name, fn in kernel.functions.items():
        _check_body(fn.body, {p.name: p.ty for p in fn.params}, checked.report, name)
    return checked.diagnostics


def _check_body(body: list[ir.Stmt], params: dict, report, function: str | None) -> None:
    """Check a kernel's body, or with ``function`` a device function's: it cannot see the caller's
    witness, so it reads and writes its disjoint parameters only inside ``simt.unsafe()``."""
    orders: dict = {}        # disjoint tensor -> (axis order of its first access, where)

    def own_index(name: str, ty, indices: list[ir.Expr], node, verb: str, facts: frozenset) -> None:
        if function is None:
            _check_own_index(name, ty, indices, node, verb, report, orders, facts, stable, off_stride)
            return
        report("BT0499", node, f"cannot {verb} `{name}` in device function `{function}`: "
               "the index is not provably the calling thread's own",
               "a device function does not see the caller's thread index",
               f"{verb} `{name}` in the kernel at the thread's own index, or inside `with simt.unsafe():`")

    def outside_unsafe(node, what: str) -> None:
        report("BT0133", node, f"{what} requires unsafe",
               "shared memory is outside the safety proof",
               "wrap the code that declares and uses shared memory in `with simt.unsafe():`")

    stable = _stable_locals(body)
    # plain locals that began as the thread's index, for the refusals to say so: the variable of a
    # loop that starts there but steps by other than the grid's total threads (-> the witness type),
    # and a copy bound to other values too (-> ("copy", the witness's name, its type))
    off_stride = {s.var: s.start.ty for s in ir.walk_stmts(body)
                  if isinstance(s, ir.ForRange) and isinstance(s.start.ty, WitnessT)}
    off_stride.update({name: ("copy", *of) for name, of in _reassigned_copies(body).items()})

    def visit(stmts: list[ir.Stmt], unsafe: bool, facts: frozenset) -> None:
        for stmt in stmts:
            if isinstance(stmt, ir.Unsafe):
                visit(stmt.body, True, facts)
                continue
            if isinstance(stmt, ir.If):
                # `if col >= n: return` guards the rest of the block with `col < n`
                then_facts = facts | _bounds(stmt.cond, stable, True)
                after = facts | _bounds(stmt.cond, stable, False) if _leaves(stmt.then) and not stmt.orelse else facts
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
                    own_index(stmt.param, ty, stmt.indices, stmt.src, "write", facts)
            own_exprs = [v for v in vars(stmt).values()
                         if isinstance(v, ir.Expr) or (isinstance(v, list) and v and isinstance(v[0], ir.Expr))]
            for expr in ir.walk_exprs(own_exprs):
                if isinstance(expr, ir.Load):
                    ty = params[expr.param]
                    if ty.access == "disjoint" and not unsafe:
                        own_index(expr.param, ty, expr.indices, expr.src, "read", facts)
                    elif ty.access == "shared" and not unsafe:
                        outside_unsafe(expr.src, f"reading shared array `{expr.param}`")
                elif isinstance(expr, ir.AtomicOp) and params[expr.param].access == "shared" and not unsafe:
                    outside_unsafe(expr.src, f"an atomic on shared array `{expr.param}`")
            if isinstance(stmt, ir.If):
                visit(stmt.then, unsafe, then_facts)
                visit(stmt.orelse, unsafe, facts)
                facts = after
                continue
            for value in vars(stmt).values():
                if isinstance(value, list) and value and isinstance(value[0], ir.Stmt):
                    visit(value, unsafe, facts)

    visit(body, False, frozenset())


def _check_own_index(name: str, ty, indices: list[ir.Expr], node, verb: str, report, orders: dict,
                     facts: frozenset, stable: dict, off_stride: dict) -> None:
    rank = ty.rank if isinstance(ty, TensorT) else 1
    if rank == 1 and not _is_witness(indices[0]):
        form = _linear(indices[0], facts, stable)
        if isinstance(form, tuple):
            _check_same_form(name, ("linear", form), node, report, orders)
            return
        if form is not None:
            report("BT0499", indices[0].src or node, f"index is not this thread's own: cannot {verb} `{name}` here",
                   form, "guard the access with the row length the index multiplies by, "
                   "e.g. `if row < m and col < n:` for `row * n + col`")
            return
    axes = []
    for idx in indices:
        if not _is_witness(idx):
            report("BT0499", idx.src or node, f"index is not this thread's own: cannot {verb} `{name}` here",
                   _why_not_own(idx, off_stride),
                   f"a {ty} is {_PAST[verb]} only at `{name}[{_own_spelling(rank)}]`, "
                   f"with the names bound by `{_own_call(rank)}`")
            return
        axes.append(idx.ty)
    dims = {w.dims for w in axes}
    if dims != {rank} or len({w.axis for w in axes}) != rank:
        what = "the axis" if rank == 1 else f"all {rank} axes"
        linear = " (or their row-major linearisation, `row * n + col` under `col < n`)" if rank == 1 else ""
        report("BT0499", node, f"index is not this thread's own: cannot {verb} `{name}` here",
               f"`{name}` has rank {rank}, so it takes {what} of `{_own_call(rank)}`{'' if rank == 1 else ' once each'}"
               + linear,
               f"index `{name}` with the names bound by `{_own_call(rank)}`, one per axis")
        return
    # a permutation of the axes is one thread's own element too, but only if every access of
    # the parameter uses the same one: m[row, col] and m[col, row] are different threads' elements
    _check_same_form(name, tuple(w.axis for w in axes), node, report, orders)


def _check_same_form(name: str, form, node, report, orders: dict) -> None:
    first = orders.setdefault(name, (form, node))
    if first[0] != form:
        report("BT0499", node, f"index is not this thread's own: `{name}` is indexed with another axis order here",
               f"`{ast.unparse(first[1])}` (line {first[1].lineno}) orders the thread axes otherwise, "
               "so this element belongs to another thread",
               f"index `{name}` with the same order of thread axes everywhere")


def _is_witness(idx: ir.Expr) -> bool:
    return isinstance(idx, (ir.Var, ir.ThreadIndex)) and isinstance(idx.ty, WitnessT)


# ---------------------------------------------------------------- row-major linearisation


def _stable_locals(body: list[ir.Stmt]) -> dict[str, ir.Expr]:
    """Locals bound exactly once, at the top of the body: one value wherever they are read."""
    counts: dict[str, int] = {}
    for stmt in ir.walk_stmts(body):
        for name in (stmt.name,) if isinstance(stmt, ir.Assign) else (stmt.var,) if isinstance(stmt, ir.ForRange) else ():
            counts[name] = counts.get(name, 0) + 1
    return {s.name: s.value for s in body if isinstance(s, ir.Assign) and counts[s.name] == 1}


def _extent(e: ir.Expr, stable: dict):
    """A key naming the unchanging value ``e`` (equal keys, equal values), or None."""
    while isinstance(e, ir.Cast) and _lossless(e.value.ty, e.ty):
        e = e.value
    if isinstance(e, ir.Var) and e.name in stable:
        return ("local", e.name)
    if isinstance(e, ir.ParamRef) and isinstance(e.ty, Scalar):
        return ("param", e.name)
    if isinstance(e, ir.Len):
        return ("shape", e.param, 0)
    if isinstance(e, ir.Shape):
        return ("shape", e.param, e.axis)
    if isinstance(e, ir.Const) and not isinstance(e.value, bool):
        return ("const", e.value)
    if isinstance(e, ir.BinOp) and e.op == "*":
        lhs, rhs = _extent(e.lhs, stable), _extent(e.rhs, stable)
        return ("*",) + tuple(sorted((lhs, rhs), key=repr)) if lhs and rhs else None
    return None


def _lossless(src, dst) -> bool:
    src = value_type(src)
    return isinstance(src, Scalar) and src.is_int and dst.is_int and (
        dst.bits > src.bits or (dst.bits == src.bits and dst.kind == src.kind)) and not (
        src.kind == "uint" and dst.kind == "int" and dst.bits == src.bits)


def _bounds(cond: ir.Expr, stable: dict, holds: bool) -> frozenset:
    """``(witness axis, extent)`` facts ``axis < extent`` known when ``cond`` is ``holds``."""
    if isinstance(cond, ir.BoolOp) and cond.op == ("and" if holds else "or"):
        return frozenset().union(*(_bounds(v, stable, holds) for v in cond.values))
    if isinstance(cond, ir.UnaryOp) and cond.op == "not":
        return _bounds(cond.operand, stable, not holds)
    if not isinstance(cond, ir.Compare):
        return frozenset()
    op = cond.op if holds else {"<": ">=", ">=": "<", ">": "<=", "<=": ">"}.get(cond.op)
    if op in ("<", ">"):
        own, extent = (cond.lhs, cond.rhs) if op == "<" else (cond.rhs, cond.lhs)
        key = _extent(extent, stable)
        if _is_witness(own) and key is not None:
            return frozenset({((own.ty.dims, own.ty.axis), key)})
    return frozenset()


def _leaves(body: list[ir.Stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ir.Return)


def _linear(e: ir.Expr, facts: frozenset, stable: dict):
    """The form of a row-major linearisation of every axis of a 2-D/3-D witness, proven by
    ``facts``; a sentence saying which guard is missing; or None when ``e`` is no such form."""
    form = _linear_axes(e, facts, stable)
    if form is None or isinstance(form, str):
        return form
    axes, dims, _ = form
    if dims < 2 or sorted(axes) != list(range(dims)):
        return None
    return form[2]


def _linear_axes(e: ir.Expr, facts: frozenset, stable: dict):
    """(axes covered, witness dims, a key of the form) of ``A * n + b``, recursively."""
    if _is_witness(e) and e.ty.dims > 1:
        return [e.ty.axis], e.ty.dims, ("axis", e.ty.axis)
    if not (isinstance(e, ir.BinOp) and e.op == "+"):
        return None
    for scaled, inner in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
        if not (_is_witness(inner) and inner.ty.dims > 1 and isinstance(scaled, ir.BinOp) and scaled.op == "*"):
            continue
        for outer, length in ((scaled.lhs, scaled.rhs), (scaled.rhs, scaled.lhs)):
            rest = _linear_axes(outer, facts, stable)
            key = _extent(length, stable)
            if rest is None or isinstance(rest, str) or key is None:
                continue
            axes, dims, shape = rest
            if dims != inner.ty.dims or inner.ty.axis in axes:
                return None
            if ((dims, inner.ty.axis), key) not in facts:
                return (f"`{ast.unparse(e.src)}` names one thread's element only where "
                        f"`{ast.unparse(inner.src)} < {ast.unparse(length.src)}` holds")
            return axes + [inner.ty.axis], dims, (shape, key, inner.ty.axis)
    return None


def _reassigned_copies(body: list[ir.Stmt]) -> dict[str, tuple[str, WitnessT]]:
    """Plain locals that copy a witness (``k = i``), with the witness's name and type: the typer
    keeps a copy a witness only where every later binding steps it by the grid's total threads,
    so these are bound otherwise."""
    read_as = {e.name: e.ty for e in ir.walk_exprs(body) if isinstance(e, ir.Var)}   # a local's final type
    return {s.name: (s.value.name, read_as[s.value.name]) for s in ir.walk_stmts(body)
            if isinstance(s, ir.Assign) and isinstance(s.value, ir.Var)
            and isinstance(read_as.get(s.value.name), WitnessT) and not isinstance(read_as.get(s.name), WitnessT)}


def _why_not_own(idx: ir.Expr, off_stride: dict) -> str:
    if isinstance(idx, ir.Var) and isinstance(off_stride.get(idx.name), tuple):
        _, witness, ty = off_stride[idx.name]
        return (f"`{idx.name}` copies the thread index `{witness}` but is bound to other values too, so it "
                f"may hold another thread's index (a copy only ever stepped by `{grid_total_spelling(ty)}` "
                "stays this thread's own)")
    if isinstance(idx, ir.Var) and idx.name in off_stride:
        along = "" if off_stride[idx.name].dims == 1 else " along its axis"
        return (f"`{idx.name}` starts at this thread's index but steps by other than the grid's total threads"
                f"{along} (`{grid_total_spelling(off_stride[idx.name])}`), so it reaches other threads' elements")
    if isinstance(idx, ir.Load):
        return "an index read from memory may repeat across threads"
    return why_not_own(idx, "a ThreadIndex", "element", "thread")


def _own_call(rank: int) -> str:
    return f"simt.index_{rank}d()"


def _own_spelling(rank: int) -> str:
    return {1: "i", 2: "row, col", 3: "z, y, x"}[rank]


_PAST = {"write": "written", "read": "read"}
