"""``tile.rand(seed, offsets)`` and ``tile.randn(seed, offsets)``: the Philox-4x32-10 stream of
``buildtile.random``, one number per offset.

Element ``i`` of ``tile.rand(seed, offsets)`` is ``buildtile.random.uniform(seed, offsets[i])``
and of ``tile.randn`` is ``buildtile.random.normal(seed, offsets[i])``: the same stream SIMT
kernels draw from (both lower through ``buildtile.backends.common.llvm.philox4x32``), so a
number depends only on the seed and its offset, never on the tile shape, the layout or
the number of threads. Seeds and offsets are integers taken as u64 (signed ones
sign-extend), as in ``buildtile.random``; a scalar offset gives one f32.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import llvmlite.ir as lir

from buildtile.backends.common.llvm import (
    F32T, I32, I64, box_muller, intrinsic, libdevice, philox4x32, uniform_f32,
)
from buildtile.backends.tile import ir
from buildtile.backends.tile.types import F32, I64 as I64T, Scalar, TileT, Weak, value_type

#: the tile operation -> the ``buildtile.random`` function whose numbers it gives
KINDS = {"rand": "uniform", "randn": "normal"}


@dataclass(eq=False)
class Random(ir.Expr):
    """One f32 of the stream per offset: ``kind`` is ``uniform`` or ``normal``; ``seed`` and
    ``offset`` are i64 (tiles of the result's shape, or scalars for a scalar result)."""

    kind: str = "uniform"
    seed: ir.Expr = None
    offset: ir.Expr = None


class TileRandom:
    """Typing of ``tile.rand`` and ``tile.randn``, for the tile typer."""

    def call_rand(self, node: ast.Call) -> Random:
        return self.random_numbers(node, "rand")

    def call_randn(self, node: ast.Call) -> Random:
        return self.random_numbers(node, "randn")

    def random_numbers(self, node: ast.Call, name: str) -> Random:
        args = self.bind_args(node, f"tile.{name}", ["seed", "offsets"])
        seed = self.int_scalar(args["seed"])
        offsets = self.expr(args["offsets"])
        kind = KINDS[name]
        if not isinstance(offsets.ty, TileT):
            vt = value_type(offsets.ty)
            if not (isinstance(vt, Weak) and vt.kind == "int") and not (isinstance(vt, Scalar) and vt.is_int):
                self.type_mismatch(args["offsets"], f"the offsets of tile.{name}", "integers", offsets.ty)
            return Random(F32, kind=kind, seed=seed, offset=self.int_scalar(args["offsets"]), src=node)
        if not offsets.ty.dtype.is_int:
            self.type_mismatch(args["offsets"], f"the offsets of tile.{name}", "a tile of integers", offsets.ty,
                               help="number the elements with tile.arange, e.g. `base + tile.arange(n)`")
        shape = offsets.ty.shape
        return Random(TileT(F32, shape), kind=kind, seed=ir.Splat(TileT(I64T, shape), value=seed, src=node),
                      offset=self.astype(offsets, I64T, node), src=node)


def sample(b: lir.IRBuilder, module: lir.Module, kind: str, seed: lir.Value, offset: lir.Value) -> lir.Value:
    """The f32 of the stream at ``offset`` under ``seed`` (both i64), as ``buildtile.random`` defines it:
    Philox of the counter (lo(offset), hi(offset), 0, 0) under the key (lo(seed), hi(seed))."""
    halves = [b.trunc(offset, I32), b.trunc(b.lshr(offset, I64(32)), I32), I32(0), I32(0)]
    key = [b.trunc(seed, I32), b.trunc(b.lshr(seed, I64(32)), I32)]
    words = philox4x32(b, halves, key)
    if kind == "uniform":
        return uniform_f32(b, words[0])
    log, cospi = (libdevice(module, f, F32T, 1) for f in ("log", "cospi"))
    return box_muller(b, words[0], words[1], log, intrinsic(module, "llvm.sqrt", F32T, 1), cospi)
