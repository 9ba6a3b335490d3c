"""The tile IR: structured statements over typed scalar and tile expressions.

One IR is built per specialization, so every tile shape in it is a
constant. Broadcasting is explicit (``Splat``, ``ExpandDims``,
``Broadcast``): the operands of an elementwise node always have its shape.
Every node keeps the ``ast`` node it came from (``src``) for diagnostics;
tile-valued nodes get a ``layout`` from the layout plan (``plan.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from buildtile.backends.common.ir import (  # noqa: F401 - the shared nodes are tile IR nodes too
    Assign, BinOp, BoolOp, BuiltinCall, Cast, Compare, Const, Expr, If, Param, Select, Shape, Stmt, UnaryOp, Var,
    children, walk_exprs, walk_stmts,
)
from buildtile.backends.common.types import I32


# ---------------------------------------------------------------- scalars


@dataclass(eq=False)
class ScalarParam(Expr):
    """A scalar kernel parameter's value."""

    name: str = ""


@dataclass(eq=False)
class TileId(Expr):
    """``z.tile_id(axis)``: this block's tile index along ``axis`` of ``z``'s partition."""

    param: str = ""
    axis: int = 0


@dataclass(eq=False)
class NumTiles(Expr):
    """``z.num_tiles(axis)``: ceil(z.shape[axis] / tile_shape[axis])."""

    param: str = ""
    axis: int = 0


@dataclass(eq=False)
class Math(BuiltinCall):
    """An elementwise math function: exp, log, sqrt, maximum ..."""


# ---------------------------------------------------------------- tiles


@dataclass(eq=False)
class Where(Expr):
    """``tile.where(cond, a, b)``: per element, ``a`` where ``cond`` holds, else ``b``."""

    cond: Expr = None
    then: Expr = None
    orelse: Expr = None


@dataclass(eq=False)
class Splat(Expr):
    """A scalar seen as a tile of ``ty.shape``."""

    value: Expr = None


@dataclass(eq=False)
class Broadcast(Expr):
    """A tile whose size-1 axes are repeated up to ``ty.shape`` (same rank)."""

    value: Expr = None


@dataclass(eq=False)
class ExpandDims(Expr):
    """``t[:, None]``: a new axis of extent 1 at ``axis``."""

    value: Expr = None
    axis: int = 0


@dataclass(eq=False)
class Reshape(Expr):
    """The same elements, in row-major order, as a tile of ``ty.shape``."""

    value: Expr = None


@dataclass(eq=False)
class Permute(Expr):
    """Axis ``k`` of the result is axis ``perm[k]`` of ``value``."""

    value: Expr = None
    perm: tuple[int, ...] = ()


#: the reductions that give, per element of the result, the position along the axis of the element
#: they pick (the first of equal ones), as a tile of INDEX_DTYPE (i32, as Triton's argmax)
INDEX_REDUCTIONS = ("argmax", "argmin")
INDEX_DTYPE = I32


@dataclass(eq=False)
class Reduce(Expr):
    """``t.sum(axis)`` and friends: ``axis`` reduced away."""

    op: str = "sum"        # sum, prod, max, min, or one of INDEX_REDUCTIONS
    value: Expr = None
    axis: int = 0

    @property
    def carried(self) -> int:
        """Values each combining step moves: an index reduction carries its index with the value."""
        return 2 if self.op in INDEX_REDUCTIONS else 1


@dataclass(eq=False)
class Load(Expr):
    """``tile.load(x, index, shape)``: the tile at ``index`` of ``x`` seen as a grid of ``ty.shape`` tiles.

    Elements outside ``x`` read as ``padding``.
    """

    param: str = ""
    index: list[Expr] = field(default_factory=list)
    padding: float | int = 0


@dataclass(eq=False)
class Full(Expr):
    """``tile.full(shape, value, dtype)`` (and ``zeros``): a constant tile."""

    value: float | int | bool = 0


@dataclass(eq=False)
class Arange(Expr):
    """``tile.arange(n, dtype)``: 0, 1, ... n-1."""


@dataclass(eq=False)
class Mma(Expr):
    """``tile.mma(a, b, acc)``: a @ b + acc, f16/bf16 operands, f32 accumulator."""

    a: Expr = None
    b: Expr = None
    acc: Expr = None


# ---------------------------------------------------------------- statements


@dataclass(eq=False)
class Store(Stmt):
    """``z.store(t)`` (``index`` None: the block's own tile) or ``tile.store(z, index, t)``."""

    param: str = ""
    index: list[Expr] | None = None
    value: Expr = None


@dataclass(eq=False)
class ForRange(Stmt):
    """``for var in tile.range(start, stop, step)``; ``step`` is a nonzero constant or a run-time i64."""

    var: str = ""
    start: Expr = None
    stop: Expr = None
    step: int | Expr = 1
    body: list[Stmt] = field(default_factory=list)


@dataclass
class KernelIR:
    """One specialization of a ``@tile.kernel``: every tile shape in it is a constant."""

    name: str
    params: list[Param]
    locals: dict[str, Any]         # local name -> Scalar, TileT or TileIdT
    body: list[Stmt]
    tile_shapes: dict[str, tuple[int, ...]]   # every tile.Out parameter's tile shape

    @property
    def param_types(self) -> dict[str, Any]:
        return {p.name: p.ty for p in self.params}


def is_tile(e: Expr) -> bool:
    from buildtile.backends.tile.types import TileT

    return isinstance(e.ty, TileT)
