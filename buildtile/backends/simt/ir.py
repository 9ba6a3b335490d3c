"""The SIMT typed IR: structured statements over typed expressions.

The nodes both languages share live in ``buildtile.backends.common.ir``;
these are SIMT's own: parameters by name, thread geometry, element loads
and stores, atomics, shared memory, device functions and their loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from buildtile.backends.common.ir import (  # noqa: F401 - the shared nodes are SIMT IR nodes too
    Assign, BinOp, BoolOp, BuiltinCall, Cast, Compare, Const, Expr, If, Param, Select, Shape, Stmt, UnaryOp, Var,
    children, walk_exprs, walk_stmts,
)


@dataclass(eq=False)
class ParamRef(Expr):
    """A kernel parameter read by name: a scalar's value, or an array for ``len``/``.shape``."""

    name: str = ""


@dataclass(eq=False)
class Intrinsic(BuiltinCall):
    """A call of a built-in: math functions and thread geometry."""


@dataclass(eq=False)
class ThreadIndex(Expr):
    """``simt.index_Nd()``: a witness (1-D) or a tuple of witnesses."""

    dims: int = 1


@dataclass(eq=False)
class Len(Expr):
    """``len(p)`` of a slice parameter or a shared array (i64)."""

    param: str = ""


@dataclass(eq=False)
class Load(Expr):
    """``p[i]``, ``m[row, col]``: one element of an array parameter or a shared array."""

    param: str = ""
    indices: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class FieldLoad(Load):
    """``p[i].x``: one field of a record element."""

    field: str = ""


@dataclass(eq=False)
class Call(Expr):
    """A call of a ``@simt.device`` function."""

    func: str = ""
    args: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class TupleItem(Expr):
    """Element ``index`` of the tuple a device function returned into the local ``tuple``."""

    tuple: str = ""
    index: int = 0


@dataclass(eq=False)
class Values(Expr):
    """Several values unpacked at once (``w, h = simt.gridsize(2)``); only a tuple assignment reads it."""

    values: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class AtomicOp(Expr):
    """``p.atomic_add(i, v)`` and friends on an AtomicSlice or a shared array
    (``s.atomic_add((r, c), v)``); gives the old value."""

    param: str = ""
    op: str = "add"        # add, min, max, exchange, cas
    indices: list[Expr] = field(default_factory=list)   # one per axis of the array
    args: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class ConstArrayLoad(Expr):
    """``COEFFS[k]`` of a module-level tuple of numbers at a run-time index (constant memory);
    an index out of range reads 0."""

    name: str = ""
    values: tuple = ()
    index: Expr = None


# ---------------------------------------------------------------- statements


@dataclass(eq=False)
class Store(Stmt):
    """``p[i] = v``: one element of a disjoint parameter or a shared array."""

    param: str = ""
    indices: list[Expr] = field(default_factory=list)
    value: Expr = None


@dataclass(eq=False)
class FieldStore(Store):
    """``out[i].x = v``: one field of a record element."""

    field: str = ""


@dataclass(eq=False)
class ExprStmt(Stmt):
    """A call kept for its effect: an atomic, a barrier, a device function."""

    value: Expr = None


@dataclass(eq=False)
class ForRange(Stmt):
    """``for var in range(start, stop, step)``, any step of the loop variable's type."""

    var: str = ""
    start: Expr = None
    stop: Expr = None
    step: Expr = None
    step_sign: int = 1      # sign of a constant step; 0 when only known at run time
    body: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class While(Stmt):
    """``while cond:``."""

    cond: Expr = None
    body: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class Break(Stmt):
    """``break`` out of the innermost loop."""


@dataclass(eq=False)
class Continue(Stmt):
    """``continue`` with the next iteration of the innermost loop."""


@dataclass(eq=False)
class Return(Stmt):
    value: Expr | None = None   # only device functions return values
    values: list[Expr] = field(default_factory=list)   # `return a, b` of a function returning a tuple


@dataclass(eq=False)
class SharedDecl(Stmt):
    """``buf = simt.shared_array(T, n)``."""

    name: str = ""
    ty: Any = None


@dataclass(eq=False)
class Unsafe(Stmt):
    """``with simt.unsafe():``: the programmer vouches for disjointness inside."""

    body: list[Stmt] = field(default_factory=list)


@dataclass
class FunctionIR:
    """A ``@simt.device`` function: scalar and array parameters, a scalar, a tuple or no result."""

    name: str
    params: list[Param]
    locals: dict[str, Any]
    body: list[Stmt]
    ret: Any                        # a Scalar, or VOID


@dataclass
class KernelIR:
    """A ``@simt.kernel``: its parameters, typed body, thread-index rank and what it calls."""

    name: str
    params: list[Param]
    locals: dict[str, Any]          # local name -> type
    body: list[Stmt]
    index_dims: int                 # N of the index_Nd() used, 0 when none
    shared: dict[str, Any] = field(default_factory=dict)   # shared array name -> SharedT
    functions: dict[str, FunctionIR] = field(default_factory=dict)  # device functions it calls

