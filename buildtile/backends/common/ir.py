"""The IR nodes every kernel language shares, and the walkers over them.

A language's IR module defines its own nodes on top of these (thread indices,
tiles ...) and re-exports these, so ``ir.BinOp`` is one class in both.
Every node keeps the ``ast`` node it came from (``src``), so later stages
(ownership checks, debug bounds reports) can point at the source.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Expr:
    ty: Any
    src: ast.AST | None = field(default=None, repr=False, kw_only=True)
    #: how a lowering distributes the value over threads (set by the tile layout plan)
    layout: Any = field(default=None, repr=False, kw_only=True)


@dataclass(eq=False)
class Const(Expr):
    value: int | float | bool = 0


@dataclass(eq=False)
class Var(Expr):
    name: str = ""


@dataclass(eq=False)
class BinOp(Expr):
    op: str = "+"          # + - * / // % & | ^ << >> (tile: also cdiv)
    lhs: Expr = None
    rhs: Expr = None


@dataclass(eq=False)
class Compare(Expr):
    op: str = "<"          # < <= > >= == !=
    lhs: Expr = None
    rhs: Expr = None


@dataclass(eq=False)
class BoolOp(Expr):
    """``and`` / ``or`` of scalar conditions (operands have no side effects)."""

    op: str = "and"
    values: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class UnaryOp(Expr):
    op: str = "-"          # - not ~
    operand: Expr = None


@dataclass(eq=False)
class Select(Expr):
    """Scalar ``a if cond else b``."""

    cond: Expr = None
    then: Expr = None
    orelse: Expr = None


@dataclass(eq=False)
class Cast(Expr):
    """A scalar cast ``f32(x)`` (tile: also a tile's ``astype``)."""

    value: Expr = None


@dataclass(eq=False)
class BuiltinCall(Expr):
    """A call of a function the language defines, by name (each language has its own)."""

    name: str = ""
    args: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class Shape(Expr):
    """``x.shape[axis]`` of an array parameter (i64, known at launch)."""

    param: str = ""
    axis: int = 0


# ---------------------------------------------------------------- statements


@dataclass(eq=False)
class Stmt:
    src: ast.AST | None = field(default=None, repr=False, kw_only=True)


@dataclass(eq=False)
class Assign(Stmt):
    name: str = ""
    value: Expr = None


@dataclass(eq=False)
class If(Stmt):
    cond: Expr = None
    then: list[Stmt] = field(default_factory=list)
    orelse: list[Stmt] = field(default_factory=list)


@dataclass
class Param:
    name: str
    ty: Any
    src: ast.AST | None = field(default=None, repr=False)


def children(node: Expr | Stmt) -> list:
    """The expressions and statements directly under ``node``."""
    out = []
    for value in vars(node).values():
        if isinstance(value, (Expr, Stmt)):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, (Expr, Stmt)))
    return out


def walk_exprs(node) -> Iterator[Expr]:
    """Every expression under a statement, an expression or a list of them, depth first.

    Walked with a stack of its own, not nested generators: a generator chain as deep as the
    expression would pass each node up through every level (quadratic in a long sum)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
            continue
        if isinstance(item, Expr):
            yield item
        if isinstance(item, (Expr, Stmt)):
            stack.extend(reversed(children(item)))


def walk_stmts(stmts: list[Stmt]) -> Iterator[Stmt]:
    """Every statement, nested ones included, depth first."""
    for stmt in stmts:
        yield stmt
        for value in vars(stmt).values():
            if isinstance(value, list) and value and isinstance(value[0], Stmt):
                yield from walk_stmts(value)
