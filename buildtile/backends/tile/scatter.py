"""Scatter: ``tile.atomic_add(acc, indices, values, mask=None)`` into a ``tile.Atomic`` output.

A ``tile.Atomic[T, rank]`` parameter is an output every block may write, but
only by atomic adds: its elements are shared, not partitioned, so no
ownership proof is needed and no two adds are lost. ``indices`` holds one
integer tile per axis (as for a gather), broadcast with ``values`` (and the
optional ``mask``); an element whose index lies outside the array on any
axis, or where the mask is False, adds nothing. A kernel does not read an
atomic output (other blocks change it while it runs) nor ``tile.store``
into it; the host treats it as an argument the kernel reads and writes, so
its initial contents are what the adds accumulate onto.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import llvmlite.ir as lir

from buildtile.backends.tile import ir, memory
from buildtile.backends.tile.gather import is_integer
from buildtile.backends.tile.types import BOOL, F32, F64, I32, I64, ArrayT, TileT

#: element types an atomic add exists for on every supported GPU
ATOMIC_DTYPES = (F32, F64, I32, I64)


@dataclass(eq=False)
class ScatterOperands(ir.Expr):
    """The values of a scatter with their indices (i64) and mask (or None), all of the values' shape;
    one node, so the layout plan gives them one layout."""

    values: ir.Expr = None
    indices: list[ir.Expr] = field(default_factory=list)
    mask: ir.Expr | None = None


@dataclass(eq=False)
class AtomicAdd(ir.Store):
    """``tile.atomic_add(acc, indices, values)``: ``value`` is the :class:`ScatterOperands`."""


class TileScatter:
    """Typing of ``tile.atomic_add``, for the tile typer."""

    def atomic_add(self, call: ast.Call) -> AtomicAdd:
        args = self.bind_args(call, "tile.atomic_add", ["array", "indices", "values", "mask"], {"mask": None})
        target = args["array"]
        param = self.params.get(target.id) if isinstance(target, ast.Name) else None
        if param is None or not (isinstance(param.ty, ArrayT) and param.ty.atomic):
            got = param.ty if param is not None else "this"
            self.fail("BT0308", target, "`tile.atomic_add` adds into a tile.Atomic parameter",
                      label=f"{got} is not a tile.Atomic[T, rank]" if param is not None else "",
                      help="declare the output `tile.Atomic[T, rank]`: any block may add into any of its elements")
        elem = param.ty.elem
        if elem not in ATOMIC_DTYPES:
            self.type_mismatch(target, "the elements of an atomic output", "f32, f64, i32 or i64", elem)
        rank = param.ty.rank
        items = args["indices"].elts if isinstance(args["indices"], (ast.Tuple, ast.List)) else [args["indices"]]
        if len(items) != rank:
            self.fail("BT0308", args["indices"], f"an atomic add into `{param.name}` takes {rank} tile"
                      f"{'s' if rank > 1 else ''} of indices, one per axis; this index has {len(items)}")
        indices = [self.expr(i) for i in items]
        for value, item in zip(indices, items):
            if not is_integer(value.ty):
                self.type_mismatch(item, "an index of tile.atomic_add", "integers", value.ty)
        values = self.expr(args["values"])
        mask = self.expr(args["mask"]) if args["mask"] is not None else None
        if mask is not None and not (isinstance(mask.ty, TileT) and mask.ty.dtype == BOOL):
            self.type_mismatch(args["mask"], "the mask of tile.atomic_add", "a tile of bools", mask.ty)
        operands = indices + [values] + ([mask] if mask is not None else [])
        tiles = [v.ty.shape for v in operands if isinstance(v.ty, TileT)]
        if not tiles:
            self.fail("BT0308", call, "`tile.atomic_add` adds tiles", help="pass a tile of values or of indices")
        shape = self.broadcast_shapes(tiles, call)
        values = self.broadcast_to(self.as_tile(values, elem, shape, args["values"], "the added values")
                                   if isinstance(values.ty, TileT) else
                                   ir.Splat(TileT(elem, shape), value=self.scalar_as(values, elem, args["values"]),
                                            src=args["values"]), shape)
        index_tiles = []
        for value, item in zip(indices, items):
            if isinstance(value.ty, TileT):
                index_tiles.append(self.broadcast_to(self.astype(value, I64, item), shape))
            else:
                index_tiles.append(ir.Splat(TileT(I64, shape), value=self.int_scalar(item), src=item))
        if mask is not None:
            mask = self.broadcast_to(mask, shape)
        operands = ScatterOperands(TileT(elem, shape), values=values, indices=index_tiles, mask=mask, src=call)
        return AtomicAdd(param=param.name, index=None, value=operands, src=call)


def lower_atomic_add(em, arr, values: list[lir.Value], indices: list[list[lir.Value]],
                     mask: list[lir.Value] | None, owner: lir.Value | None) -> None:
    """One atomic add per element held (by its owning thread, where the layout has copies)."""
    b = em.b
    op = "fadd" if arr.elem.is_float else "add"
    for r, coords in enumerate(zip(*indices)):
        ok = memory.in_bounds(em, arr, list(coords))
        if mask is not None:
            ok = b.and_(ok, mask[r])
        if owner is not None:
            ok = b.and_(ok, owner)
        with b.if_then(ok):
            ptr = memory.element_address(em, arr, list(coords), unit_inner=False)
            b.atomic_rmw(op, ptr, values[r], "monotonic")
