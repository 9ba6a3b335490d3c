"""Gather: ``tile.gather(x, indices)`` (and ``tile.load(x, indices)`` with tiles of indices).

Element ``e`` of the result is ``x[indices[0][e], ..., indices[r-1][e]]``: one
integer tile per axis of ``x`` (a rank-1 ``x`` takes the tile itself), the
tiles broadcast together to the result's shape. An element whose index lies
outside ``x`` on any axis, or where the optional ``mask`` is False, reads
``padding`` and touches no memory. A gather only reads (``x`` is an input),
so it needs no ownership proof; writing at a tile of indices is a scatter,
which a partitioned output refuses (BT0499).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import llvmlite.ir as lir

from buildtile.backends.common.llvm import const_of
from buildtile.backends.tile import ir, memory
from buildtile.backends.tile.types import BOOL, I64, Scalar, TileT, Weak, value_type


@dataclass(eq=False)
class Gather(ir.Expr):
    """``x`` read at a tile of indices per axis (i64 tiles of the result's shape); ``mask`` (a bool tile
    of that shape, or None) leaves elements at ``padding``."""

    param: str = ""
    indices: list[ir.Expr] = field(default_factory=list)
    mask: ir.Expr | None = None
    padding: float | int = 0


def is_integer(ty) -> bool:
    """An integer scalar (a tile id, a weak literal) or a tile of integers."""
    vt = ty.dtype if isinstance(ty, TileT) else value_type(ty)
    if isinstance(vt, Weak):
        return vt.kind == "int"
    return isinstance(vt, Scalar) and vt.is_int


class TileGather:
    """Typing of ``tile.gather``, for the tile typer."""

    def call_load(self, node: ast.Call):
        if self.is_gather_load(node):
            return self.gather_load(node)
        return super().call_load(node)

    def is_gather_load(self, node: ast.Call) -> bool:
        """Whether a ``tile.load`` call indexes with tiles (a gather) rather than tile coordinates."""
        index = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "index"), None)
        if index is None:
            return False
        items = index.elts if isinstance(index, (ast.Tuple, ast.List)) else [index]
        return any(isinstance(self.expr(i).ty, TileT) for i in items)

    def gather_load(self, node: ast.Call) -> Gather:
        """``tile.load(x, indices, padding=..., mask=...)``: a gather; a shape, if given, is the indices'."""
        args = self.bind_args(node, "tile.load", ["array", "index", "shape", "padding", "mask"],
                              {"shape": None, "padding": None, "mask": None})
        result = self.gather(node, {"array": args["array"], "indices": args["index"], "mask": args["mask"],
                                    "padding": args["padding"]})
        if args["shape"] is not None:
            shape = self.const_shape(args["shape"], "the tile shape")
            if tuple(shape) != result.ty.shape:
                self.fail("BT0308", args["shape"], f"a gather's shape is its indices': {result.ty.shape}, "
                          f"not {tuple(shape)}", help="leave the shape out")
        return result

    def call_gather(self, node: ast.Call) -> Gather:
        args = self.bind_args(node, "tile.gather", ["array", "indices", "mask", "padding"],
                              {"mask": None, "padding": None})
        return self.gather(node, args)

    def gather(self, node: ast.Call, args: dict) -> Gather:
        param = self.input_array(args["array"], "tile.gather")
        rank = param.ty.rank
        items = args["indices"].elts if isinstance(args["indices"], (ast.Tuple, ast.List)) else [args["indices"]]
        if len(items) != rank:
            tiles = "tile" if rank == 1 else "tiles"
            self.fail("BT0308", args["indices"], f"a gather from `{param.name}` takes {rank} {tiles} "
                      f"of indices, one per axis; this index has {len(items)}",
                      label=f"`{param.name}` is a {param.ty}",
                      help="pass a tuple with a tile (or a scalar) of indices per axis: `(rows, cols)`")
        values = [self.expr(i) for i in items]
        for value, item in zip(values, items):
            if not isinstance(value.ty, TileT) and not is_integer(value.ty):
                self.type_mismatch(item, "an index of tile.gather", "an integer tile or scalar", value.ty)
            if isinstance(value.ty, TileT) and not is_integer(value.ty):
                self.type_mismatch(item, "an index of tile.gather", "a tile of integers", value.ty,
                                   help="compute indices in an integer type, or convert with .astype(i32)")
        tiles = [v for v in values if isinstance(v.ty, TileT)]
        if not tiles:
            self.fail("BT0308", args["indices"], "`tile.gather` takes tiles of indices",
                      help=f"for the tile at tile coordinates, write `tile.load({param.name}, index, shape)`")
        mask = None
        if args["mask"] is not None:
            mask = self.expr(args["mask"])
            if not (isinstance(mask.ty, TileT) and mask.ty.dtype == BOOL):
                self.type_mismatch(args["mask"], "the mask of tile.gather", "a tile of bools", mask.ty)
        shape = self.broadcast_shapes([v.ty.shape for v in tiles] + ([mask.ty.shape] if mask is not None else []), node)
        indices = []
        for value, item in zip(values, items):
            if isinstance(value.ty, TileT):
                indices.append(self.broadcast_to(self.astype(value, I64, item), shape))
            else:
                indices.append(ir.Splat(TileT(I64, shape), value=self.int_scalar(item), src=item))
        if mask is not None:
            mask = self.broadcast_to(mask, shape)
        return Gather(TileT(param.ty.elem, shape), param=param.name, indices=indices, mask=mask,
                      padding=self.padding(args["padding"], param.ty.elem), src=node)


def lower_gather(em, arr, e: Gather, indices: list[list[lir.Value]], mask: list[lir.Value] | None) -> list[lir.Value]:
    """One predicated read per element: inside ``arr`` on every axis and where ``mask`` holds."""
    b = em.b
    pad = const_of(arr.elem, e.padding)
    out = []
    for r, coords in enumerate(zip(*indices)):
        ok = memory.in_bounds(em, arr, list(coords))
        if mask is not None:
            ok = b.and_(ok, mask[r])
        ptr = memory.element_address(em, arr, list(coords), unit_inner=False)
        value = memory.predicated_load(em, ptr, ok, arr.elem)
        out.append(b.select(ok, value, pad))
    return out
