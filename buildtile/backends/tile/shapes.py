"""Compile-time values of tile kernels and the broadcasting of tile operands.

One IR is built per specialization, so every tile shape is a constant: literals,
module constants, ``tile_shape`` entries and locals bound once to those fold here
(:meth:`TileShapes.const`). Elementwise operands broadcast NumPy-style, made
explicit in the IR as ``Splat``, ``ExpandDims`` and ``Broadcast``.
"""

from __future__ import annotations

import ast
import math

from buildtile.backends.common.constants import BINOPS, CMPOPS, FOLD_COMPARE, MATH_CONSTANTS, fold_binop, fold_math
from buildtile.backends.common.typer import BaseTyper, promoted, widens
from buildtile.backends.tile import ir
from buildtile.backends.tile.params import scalar_type
from buildtile.backends.tile.types import BOOL, Scalar, TileT, Weak, elem_bytes, is_pow2, value_type
from buildtile.discovery import resolve_dotted

TILE_MODULE = "buildtile.tile"
#: the most elements one tile may have (registers: 128 f32 per thread at 256 threads, as a
#: 128 x 256 mma accumulator takes)
MAX_TILE_ELEMENTS = 1 << 15
#: the most elements of a tile.Out parameter's tile: one larger than MAX_TILE_ELEMENTS is never
#: held whole, so the block writes it in chunks (``tile.store`` at chunk indices)
MAX_OUT_TILE_ELEMENTS = 1 << 20
#: builtins that fold over compile-time numbers (``min(BLOCK, 4 * cols)``), as Python computes them
_FOLDED_BUILTINS = {"min": min, "max": max, "abs": abs}


class TileShapes(BaseTyper):
    """Constants, shapes and broadcasting, for the tile typer."""

    def const(self, node: ast.AST):
        """The compile-time value of ``node`` (int, float, bool or a tuple of them), or None."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.const_locals:
                return self.const_locals[node.id]
            if node.id in self.locals or node.id in self.params:
                return None
            return self.consts.get(node.id)
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.const(e) for e in node.elts]
            return tuple(items) if all(i is not None for i in items) else None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)):
            v = self.const(node.operand)
            if v is None or isinstance(v, (tuple, bool)) or (isinstance(node.op, ast.Invert) and isinstance(v, float)):
                return None
            return -v if isinstance(node.op, ast.USub) else ~v if isinstance(node.op, ast.Invert) else v
        if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
            lhs, rhs = self.const(node.left), self.const(node.right)
            if any(v is None or isinstance(v, (tuple, bool)) for v in (lhs, rhs)):
                return None
            try:
                return fold_binop(BINOPS[type(node.op)], lhs, rhs)
            except (ArithmeticError, ValueError):
                return None
        if isinstance(node, ast.Compare):
            return self._const_compare(node)
        if isinstance(node, ast.BoolOp):
            values = [self.const(v) for v in node.values]
            if any(v is None or isinstance(v, tuple) for v in values):
                return None
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            v = self.const(node.operand)
            return None if v is None or isinstance(v, tuple) else not v
        if isinstance(node, ast.IfExp):   # `cols if rows == 1 else cols // 4`: only the branch taken must fold
            test = self.const(node.test)
            if test is None or isinstance(test, tuple):
                return None
            return self.const(node.body if test else node.orelse)
        if isinstance(node, ast.Attribute):
            dotted = resolve_dotted(node, self.ns)
            if dotted in MATH_CONSTANTS:
                return MATH_CONSTANTS[dotted]
            if node.attr == "tile_shape" and isinstance(node.value, ast.Name) and node.value.id in self.tile_shapes:
                return tuple(self.tile_shapes[node.value.id])
            if node.attr == "shape" and isinstance(node.value, ast.Name) and isinstance(self.locals.get(node.value.id), TileT):
                return self.locals[node.value.id].shape
            if node.attr == "itemsize":   # `T.itemsize`, `f32.itemsize`, `x.dtype.itemsize`: bytes of one element
                dtype = self._const_dtype(node.value)
                return None if dtype is None else elem_bytes(dtype)
            return None
        if isinstance(node, ast.Subscript):
            base = self.const(node.value)
            index = self.const(node.slice)
            if isinstance(base, tuple) and isinstance(index, int) and -len(base) <= index < len(base):
                return base[index]
            return None
        if isinstance(node, ast.Call) and not node.keywords:
            dotted = resolve_dotted(node.func, self.ns)
            if isinstance(node.func, ast.Name) and node.func.id == "float" and len(node.args) == 1 \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                try:
                    return float(node.args[0].value)
                except ValueError:
                    return None
            if isinstance(node.func, ast.Name) and node.func.id in _FOLDED_BUILTINS and node.args \
                    and not self._shadowed(node.func.id):
                args = [self.const(a) for a in node.args]
                arity = len(args) == 1 if node.func.id == "abs" else len(args) >= 2
                if not arity or any(a is None or isinstance(a, (tuple, bool)) for a in args):
                    return None
                return _FOLDED_BUILTINS[node.func.id](*args)
            if dotted and dotted.startswith("math."):
                args = [self.const(a) for a in node.args]
                return None if any(a is None or isinstance(a, tuple) for a in args) else fold_math(dotted, args)
            if dotted == TILE_MODULE + ".cdiv" and len(node.args) == 2:
                a, b = self.const(node.args[0]), self.const(node.args[1])
                if isinstance(a, int) and isinstance(b, int) and b:
                    return -(-a // b)
        return None

    def _shadowed(self, name: str) -> bool:
        """Whether ``name`` is the kernel's own (a local, a parameter, a module global), not the builtin."""
        return name in self.const_locals or name in self.locals or name in self.params or name in self.consts

    def _const_dtype(self, node: ast.AST) -> Scalar | None:
        """The element type ``node`` names at compile time: a dtype (``f32``, a bound dtype variable)
        or the ``.dtype`` of an array parameter or a tile local; else None."""
        if isinstance(node, ast.Attribute) and node.attr == "dtype" and isinstance(node.value, ast.Name):
            name = node.value.id
            param = self.params.get(name)
            if param is not None:
                return param.ty if isinstance(param.ty, Scalar) else param.ty.elem
            local = self.locals.get(name)
            if isinstance(local, TileT):
                return local.dtype
            return local if isinstance(local, Scalar) else None
        return scalar_type(node, self.ns)

    def _const_compare(self, node: ast.Compare) -> bool | None:
        """A chained comparison of compile-time numbers (``cols > 4096``, ``0 < k <= n``), or None."""
        operands = [self.const(node.left)] + [self.const(c) for c in node.comparators]
        if any(v is None or isinstance(v, (tuple, bool)) for v in operands):
            return None
        if any(type(op) not in CMPOPS for op in node.ops):
            return None   # `is`, `in`
        return all(FOLD_COMPARE[CMPOPS[type(op)]](a, b) for op, a, b in zip(node.ops, operands, operands[1:]))

    def const_shape(self, node: ast.AST, what: str) -> tuple[int, ...]:
        value = self.const(node)
        if isinstance(value, int) and not isinstance(value, bool):
            value = (value,)
        if not (isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
            self.fail("BT0308", node, f"{what} must be known at compile time",
                      help="use literals, module constants, `z.tile_shape` entries or names bound once to those")
        for v in value:
            if not is_pow2(v):
                self.fail("BT0308", node, f"{what} {value} has an extent that is not a power of two",
                          help="tile extents are powers of two; ragged edges are masked automatically")
        size = math.prod(value)
        if size > MAX_TILE_ELEMENTS:
            self.fail("BT0600", node, f"a tile of {value} has {size} elements, more than the {MAX_TILE_ELEMENTS} "
                      "one block holds in registers", help="use smaller tiles, or loop over the tile with tile.range")
        return value

    def const_int(self, node: ast.AST, what: str) -> int:
        value = self.const(node)
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail("BT0308", node, f"{what} must be a constant integer")
        return value

    # ------------------------------------------------------------ broadcasting
    def elementwise(self, values: list[ir.Expr], nodes: list[ast.AST], node) -> tuple[Scalar, tuple, list[ir.Expr]]:
        """Operands of an elementwise operation: one dtype, broadcast to one shape."""
        tiles = [v for v in values if isinstance(v.ty, TileT)]
        dtype = tiles[0].ty.dtype
        for v in tiles[1:]:
            if v.ty.dtype != dtype:
                meet = promoted(dtype, v.ty.dtype)
                if meet is None:
                    self.type_mismatch(node, "the operands", f"tiles of {dtype}", f"a tile of {v.ty.dtype}",
                                       help=_mix_help(dtype, v.ty.dtype))
                dtype = meet
        shape = self.broadcast_shapes([v.ty.shape for v in tiles], node)
        out = []
        for v, n in zip(values, nodes):
            if not isinstance(v.ty, TileT):
                v = ir.Splat(TileT(dtype, ()), value=self.scalar_as(v, dtype, n), src=n)
            elif v.ty.dtype != dtype:     # the lossless widening (or int -> float) the operands meet by
                v = ir.Cast(TileT(dtype, v.ty.shape), value=v, src=n)
            out.append(self.broadcast_to(v, shape))
        return dtype, shape, out

    def broadcast_shapes(self, shapes: list[tuple], node) -> tuple[int, ...]:
        rank = max(len(s) for s in shapes)
        result = []
        for axis in range(rank):
            extents = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0} - {1}
            if len(extents) > 1:
                self.fail("BT0308", node, "tile shapes do not broadcast: "
                          + " and ".join(str(tuple(s)) for s in shapes),
                          help="extents must be equal or 1 along each axis; add axes with `t[:, None]`")
            result.append(extents.pop() if extents else 1)
        return tuple(result)

    def broadcast_to(self, value: ir.Expr, shape: tuple[int, ...]) -> ir.Expr:
        while value.ty.rank < len(shape):
            value = ir.ExpandDims(TileT(value.ty.dtype, (1,) + value.ty.shape), value=value, axis=0, src=value.src)
        if value.ty.shape != shape:
            value = ir.Broadcast(TileT(value.ty.dtype, shape), value=value, src=value.src)
        return value

    def as_tile(self, value: ir.Expr, dtype: Scalar, shape: tuple, node, what: str) -> ir.Expr:
        if not isinstance(value.ty, TileT):
            return ir.Splat(TileT(dtype, shape), value=self.scalar_as(value, dtype, node), src=node)
        if value.ty.dtype != dtype:
            if not widens(value.ty.dtype, dtype):
                self.type_mismatch(node, what, f"a tile of {dtype}", value.ty, help=f"convert it with .astype({dtype})")
            value = ir.Cast(TileT(dtype, value.ty.shape), value=value, src=node)   # lossless: implicit
        padded = (1,) * (len(shape) - value.ty.rank) + tuple(value.ty.shape)
        if len(padded) != len(shape) or any(v not in (1, n) for v, n in zip(padded, shape)):
            self.fail("BT0308", node, f"{what} has shape {tuple(value.ty.shape)}, but the tile is {tuple(shape)}",
                      help="a store writes exactly one tile of the output's partition")
        return self.broadcast_to(value, tuple(shape))

    def scalar_as(self, value: ir.Expr, dtype: Scalar, node) -> ir.Expr:
        """A scalar meeting a tile of ``dtype`` takes that dtype (a float never becomes an integer)."""
        vt = value_type(value.ty)
        if isinstance(vt, Weak):
            return self.coerce(value, dtype, node)
        if vt == dtype:
            return value
        if (vt.is_float and not dtype.is_float) or vt == BOOL or dtype == BOOL:
            self.type_mismatch(node, "this scalar", dtype, vt, help=f"cast it explicitly: `{dtype}(...)`")
        return ir.Cast(dtype, value=value, src=node)

    def index_tile(self, value: ir.Expr, items: list[ast.AST], node) -> ir.Expr:
        """``t[:, None]``, ``t[None, :]``, ``t[..., None]``: new axes of extent 1."""
        rank = value.ty.rank
        plain = [i for i in items if not (isinstance(i, ast.Constant) and i.value in (None, Ellipsis))]
        if any(not (isinstance(i, ast.Slice) and i.lower is None and i.upper is None and i.step is None) for i in plain):
            self.fail("BT0200", node, "tiles are indexed only to add axes (`t[:, None]`)",
                      help="select parts of an array with tile.load; combine elements with tile.where and reductions")
        ellipses = [k for k, i in enumerate(items) if isinstance(i, ast.Constant) and i.value is Ellipsis]
        if len(ellipses) > 1 or len(plain) > rank:
            self.fail("BT0308", node, f"too many indices for a tile of rank {rank}")
        if ellipses:
            k = ellipses[0]
            items = items[:k] + [ast.Slice()] * (rank - len(plain)) + items[k + 1:]
        else:
            items = items + [ast.Slice()] * (rank - len(plain))
        for axis, item in enumerate(items):
            if isinstance(item, ast.Constant) and item.value is None:
                shape = value.ty.shape[:axis] + (1,) + value.ty.shape[axis:]
                value = ir.ExpandDims(TileT(value.ty.dtype, shape), value=value, axis=axis, src=node)
        return value


def _mix_help(a: Scalar, b: Scalar) -> str:
    """The cast that makes two tile dtypes meet, for a mix that is not implicit."""
    if a.is_int and b.is_int and a.kind != b.kind:
        signed, unsigned = (a, b) if a.kind == "int" else (b, a)
        wide = f"i{min(64, 2 * max(a.bits, b.bits))}"
        return (f"signed and unsigned integers do not mix implicitly; cast one side, "
                f"e.g. `t.astype({wide})` or `t.astype({unsigned})`")
    if {a.name, b.name} == {"f16", "bf16"}:
        return "f16 and bf16 do not mix implicitly; cast one side, e.g. `t.astype(f32)` or `t.astype(bf16)`"
    return f"cast one side explicitly, e.g. `t.astype({a})` or `t.astype({b})`"
