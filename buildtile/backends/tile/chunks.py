"""Chunked stores: the proof that a block writing its tile piece by piece stays inside it.

A ``tile.Out`` tile of extent ``T`` along an axis, stored in chunks of
extent ``c`` (``c`` divides ``T``: both are powers of two), holds
``r = T / c`` chunks. ``tile.store(z, index, t)`` with a chunk ``t`` indexes
in chunk units, so block ``b`` owns chunks ``r*b .. r*b + r - 1``. An index
is proven to stay there when it is affine --

    index = r * z.tile_id(axis) + rest

-- with ``rest`` a sum of constants and ``tile.range`` loop variables whose
bounds are constants, and ``0 <= rest <= r - 1`` over every value those
variables take. The regions ``[r*b, r*b + r)`` of distinct blocks are
disjoint, so no two blocks write one element. Names bound once stand for
their values; anything else (a scalar parameter, a product of two run-time
values, a reassigned name) is data the compiler cannot bound, and refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from buildtile.backends.tile import ir
from buildtile.backends.tile.types import TileIdT, TileT


class Unbounded(Exception):
    """An index term the proof cannot bound: ``node`` and why."""

    def __init__(self, node: ir.Expr, why: str) -> None:
        super().__init__(why)
        self.node = node
        self.why = why


@dataclass
class Affine:
    """``const + sum(coef * term)``; a term is a tile id (``TileIdT``) or a loop (its variable)."""

    const: int = 0
    terms: dict = field(default_factory=dict)

    def plus(self, other: "Affine", sign: int = 1) -> "Affine":
        terms = dict(self.terms)
        for k, v in other.terms.items():
            terms[k] = terms.get(k, 0) + sign * v
        return Affine(self.const + sign * other.const, {k: v for k, v in terms.items() if v})

    def scaled(self, by: int) -> "Affine":
        return Affine(self.const * by, {k: v * by for k, v in self.terms.items() if v * by})


@dataclass(frozen=True)
class LoopBounds:
    """The values a loop variable takes, and after its loop holds: ``lo .. hi`` (constants)."""

    lo: int
    hi: int


Scope = dict   # loop variable -> the innermost enclosing ``ForRange`` that binds it


class Bindings:
    """What the proof knows of a kernel's names: the loops around each statement, the loop
    variables' bounds, and the values (with their own loops) of names bound once."""

    def __init__(self, kernel: ir.KernelIR) -> None:
        self.values: dict[str, tuple[ir.Expr, Scope]] = {}
        self.assigned: dict[str, int] = {}
        self.loops: dict[str, list[ir.ForRange]] = {}
        self.scopes: dict[int, Scope] = {}
        self._walk(kernel.body, {})

    def _walk(self, body: list[ir.Stmt], scope: Scope) -> None:
        for stmt in body:
            self.scopes[id(stmt)] = scope
            if isinstance(stmt, ir.Assign):
                self.values[stmt.name] = (stmt.value, scope)
                self.assigned[stmt.name] = self.assigned.get(stmt.name, 0) + 1
            elif isinstance(stmt, ir.ForRange):
                self.loops.setdefault(stmt.var, []).append(stmt)
                self._walk(stmt.body, {**scope, stmt.var: stmt})
            elif isinstance(stmt, ir.If):
                self._walk(stmt.then, scope)
                self._walk(stmt.orelse or [], scope)

    def scope_of(self, stmt: ir.Stmt) -> Scope:
        return self.scopes.get(id(stmt), {})

    def affine(self, e: ir.Expr, scope: Scope, seen: frozenset = frozenset()) -> Affine:
        """``e`` (evaluated where ``scope`` holds) as an affine form, or :class:`Unbounded`."""
        if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
            return Affine(e.value)
        if isinstance(e, ir.TileId):
            return Affine(0, {e.ty: 1})
        if isinstance(e, ir.Cast):
            return self.affine(e.value, scope, seen)
        if isinstance(e, ir.Var):
            return self.var(e, scope, seen)
        if isinstance(e, ir.UnaryOp) and e.op == "-":
            return self.affine(e.operand, scope, seen).scaled(-1)
        if isinstance(e, ir.BinOp) and e.op in ("+", "-"):
            return self.affine(e.lhs, scope, seen).plus(self.affine(e.rhs, scope, seen), 1 if e.op == "+" else -1)
        if isinstance(e, ir.BinOp) and e.op == "*":
            lhs, rhs = self.affine(e.lhs, scope, seen), self.affine(e.rhs, scope, seen)
            if not lhs.terms:
                return rhs.scaled(lhs.const)
            if not rhs.terms:
                return lhs.scaled(rhs.const)
            raise Unbounded(e, "a product of two run-time values cannot be bounded")
        if isinstance(e, ir.ScalarParam):
            raise Unbounded(e, f"`{e.name}` is a scalar parameter, known only at run time: "
                               "a data-dependent index may name any block's chunk")
        if isinstance(e, (ir.Shape, ir.NumTiles)):
            raise Unbounded(e, "an extent known only at run time cannot bound a chunk index")
        raise Unbounded(e, "this index is computed in a way the compiler cannot bound")

    def var(self, e: ir.Var, scope: Scope, seen: frozenset) -> Affine:
        name = e.name
        if isinstance(e.ty, TileIdT):
            return Affine(0, {e.ty: 1})
        loops = self.loops.get(name, [])
        if name in seen or self.assigned.get(name, 0) > (0 if loops else 1):
            raise Unbounded(e, f"`{name}` is reassigned, so its value here cannot be bounded")
        if name in scope:
            return Affine(0, {scope[name]: 1})
        if len(loops) == 1:        # read after its loop: it holds a value the loop gave it
            return Affine(0, {loops[0]: 1})
        if loops:
            raise Unbounded(e, f"`{name}` is the variable of several loops, so its value here cannot be bounded")
        if name in self.values:
            value, where = self.values[name]
            return self.affine(value, where, seen | {name})
        raise Unbounded(e, f"`{name}` cannot be bounded")

    def bounds(self, loop: ir.ForRange, at: ir.Expr) -> LoopBounds:
        start, stop = (self.constant(x) for x in (loop.start, loop.stop))
        if start is None or stop is None:
            raise Unbounded(at, f"the loop over `{loop.var}` has a bound known only at run time, "
                                "so the chunks it names cannot be bounded")
        last = start + loop.step * ((stop - start - 1) // loop.step) if stop > start else start
        return LoopBounds(start, max(start, last))

    def constant(self, e: ir.Expr) -> int | None:
        try:
            form = self.affine(e, {})
        except Unbounded:
            return None
        return None if form.terms else form.const


@dataclass(frozen=True)
class Refusal:
    """Why a chunk index is not proven to stay in the block's own tile: where, and which write escapes."""

    node: ir.Expr
    label: str


def check_chunk_index(bindings: Bindings, store: ir.Store, idx: ir.Expr, axis: int, chunks: int) -> Refusal | None:
    """None where ``idx`` provably names one of this block's ``chunks`` chunks of ``store``'s array along ``axis``."""
    param = store.param
    own = TileIdT(param, axis)
    try:
        form = bindings.affine(idx, bindings.scope_of(store))
    except Unbounded as u:
        return Refusal(u.node, u.why)
    others = [t for t in form.terms if isinstance(t, TileIdT) and t != own]
    if others:
        t = others[0]
        if t.param != param:
            return Refusal(idx, f"this uses a tile id of `{t.param}`, which does not say which chunks of `{param}` "
                                "this block owns")
        return Refusal(idx, f"this uses `{param}`'s tile id along axis {t.axis}, for axis {axis}")
    coef = form.terms.get(own, 0)
    try:
        lo, hi = form.const, form.const
        for term, k in form.terms.items():
            if isinstance(term, TileIdT):
                continue
            b = bindings.bounds(term, idx)
            lo, hi = lo + min(k * b.lo, k * b.hi), hi + max(k * b.lo, k * b.hi)
    except Unbounded as u:
        return Refusal(u.node, u.why)
    own_spelled = f"`{param}.tile_id({axis})`"
    if coef == 0:
        return Refusal(idx, f"without {own_spelled} this names the same chunks in every block")
    if coef != chunks:
        block, chunk = _escaping_write(coef, lo, hi, chunks)
        return Refusal(idx, f"{own_spelled} is scaled by {coef}, not by {chunks}: block {block} writes chunk {chunk}, "
                            f"which block {chunk // chunks} owns")
    if hi > chunks - 1:
        return Refusal(idx, f"this reaches chunk {chunks} * {own_spelled} + {hi}, "
                            f"in the next tile of `{param}`, which another block owns")
    if lo < 0:
        return Refusal(idx, f"this reaches chunk {chunks} * {own_spelled} - {-lo}, "
                            f"in the previous tile of `{param}`, which another block owns")
    return None


def _escaping_write(coef: int, lo: int, hi: int, chunks: int) -> tuple[int, int]:
    """A block and the chunk it writes that lies outside its own tile (one exists when ``coef != chunks``)."""
    for block in range(1, 2 * chunks + 2):
        for rest in (lo, hi):
            chunk = coef * block + rest
            if chunk >= 0 and chunk // chunks != block:
                return block, chunk
    return 1, coef + lo


def stored_shape(value_ty, tile_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape a ``tile.store`` writes: the value's own, where it is a chunk of the tile
    (same rank, every extent at most the tile's); otherwise the whole tile, the value broadcast."""
    if isinstance(value_ty, TileT) and value_ty.rank == len(tile_shape) \
            and all(v <= t for v, t in zip(value_ty.shape, tile_shape)):
        return tuple(value_ty.shape)
    return tuple(tile_shape)


#: where a store at a tile of indices (a scatter) is refused
SCATTER_HELP = ("`{param}` is partitioned, each block writing only its own tile; to scatter, declare an output "
                "`tile.Atomic[T, rank]` and add into it with `tile.atomic_add(acc, indices, t)`")
