"""The SIMT typed IR: structured statements over typed expressions.

Every node keeps the ``ast`` node it came from (``src``), so later stages
(ownership checks, debug bounds reports) can point at the source.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Expr:
    ty: Any
    src: ast.AST | None = field(default=None, repr=False, kw_only=True)


@dataclass(eq=False)
class Const(Expr):
    value: int | float | bool = 0


@dataclass(eq=False)
class Var(Expr):
    name: str = ""


@dataclass(eq=False)
class ParamRef(Expr):
    name: str = ""


@dataclass(eq=False)
class BinOp(Expr):
    op: str = "+"          # + - * / // % & | ^ << >>
    lhs: Expr = None
    rhs: Expr = None


@dataclass(eq=False)
class Compare(Expr):
    op: str = "<"          # < <= > >= == !=
    lhs: Expr = None
    rhs: Expr = None


@dataclass(eq=False)
class BoolOp(Expr):
    op: str = "and"        # and / or, short-circuit
    values: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class UnaryOp(Expr):
    op: str = "-"          # - not ~
    operand: Expr = None


@dataclass(eq=False)
class Select(Expr):
    """``a if cond else b`` (both sides evaluated lazily)."""

    cond: Expr = None
    then: Expr = None
    orelse: Expr = None


@dataclass(eq=False)
class Cast(Expr):
    value: Expr = None


@dataclass(eq=False)
class Intrinsic(Expr):
    """A call of a built-in: math functions and thread geometry."""

    name: str = ""
    args: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class ThreadIndex(Expr):
    """``simt.index_Nd()``: a witness (1-D) or a tuple of witnesses."""

    dims: int = 1


@dataclass(eq=False)
class Len(Expr):
    param: str = ""


@dataclass(eq=False)
class Shape(Expr):
    param: str = ""
    axis: int = 0


@dataclass(eq=False)
class Load(Expr):
    param: str = ""
    indices: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class Call(Expr):
    """A call of a ``@simt.device`` function."""

    func: str = ""
    args: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class AtomicOp(Expr):
    """``p.atomic_add(i, v)`` and friends on an AtomicSlice; gives the old value."""

    param: str = ""
    op: str = "add"        # add, min, max, exchange, cas
    index: Expr = None
    args: list[Expr] = field(default_factory=list)


# ---------------------------------------------------------------- statements


@dataclass(eq=False)
class Stmt:
    src: ast.AST | None = field(default=None, repr=False, kw_only=True)


@dataclass(eq=False)
class Assign(Stmt):
    name: str = ""
    value: Expr = None


@dataclass(eq=False)
class Store(Stmt):
    param: str = ""
    indices: list[Expr] = field(default_factory=list)
    value: Expr = None


@dataclass(eq=False)
class ExprStmt(Stmt):
    value: Expr = None


@dataclass(eq=False)
class If(Stmt):
    cond: Expr = None
    then: list[Stmt] = field(default_factory=list)
    orelse: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class ForRange(Stmt):
    var: str = ""
    start: Expr = None
    stop: Expr = None
    step: Expr = None
    step_sign: int = 1      # sign of a constant step; 0 when only known at run time
    body: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class While(Stmt):
    cond: Expr = None
    body: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class Break(Stmt):
    pass


@dataclass(eq=False)
class Continue(Stmt):
    pass


@dataclass(eq=False)
class Return(Stmt):
    value: Expr | None = None   # only device functions return values


@dataclass(eq=False)
class SharedDecl(Stmt):
    """``buf = simt.shared_array(T, n)``."""

    name: str = ""
    ty: Any = None


@dataclass(eq=False)
class Unsafe(Stmt):
    body: list[Stmt] = field(default_factory=list)


@dataclass
class Param:
    name: str
    ty: Any
    src: ast.AST | None = field(default=None, repr=False)


@dataclass
class FunctionIR:
    """A ``@simt.device`` function: scalar parameters, a scalar (or no) result."""

    name: str
    params: list[Param]
    locals: dict[str, Any]
    body: list[Stmt]
    ret: Any                        # a Scalar, or VOID


@dataclass
class KernelIR:
    name: str
    params: list[Param]
    locals: dict[str, Any]          # local name -> type
    body: list[Stmt]
    index_dims: int                 # N of the index_Nd() used, 0 when none
    shared: dict[str, Any] = field(default_factory=dict)   # shared array name -> SharedT
    functions: dict[str, FunctionIR] = field(default_factory=dict)  # device functions it calls


def walk_exprs(node):
    """Yield every expression under a statement or expression, depth first."""
    if isinstance(node, list):
        for item in node:
            yield from walk_exprs(item)
        return
    if isinstance(node, Expr):
        yield node
    if isinstance(node, (Expr, Stmt)):
        for value in vars(node).values():
            if isinstance(value, (Expr, Stmt, list)):
                yield from walk_exprs(value)


def walk_stmts(stmts):
    """Yield every statement, nested ones included, depth first."""
    for stmt in stmts:
        yield stmt
        for value in vars(stmt).values():
            if isinstance(value, list) and value and isinstance(value[0], Stmt):
                yield from walk_stmts(value)
