"""The tensor-map parameters of a TMA entry, and the copies that read through them.

Each operand the copy engine loads has its array described by a
``CUtensorMap`` the host encodes at launch (``cuTensorMapEncodeTiled``: base,
extents, row stride, the box of one panel, the swizzle) and passes by value
after the entry's other parameters (interop.abi). One copy,
``cp.async.bulk.tensor.2d``, moves one box -- one panel of a tile -- from the
element coordinates it is given (innermost first) into shared memory and
counts its bytes on the stage's mbarrier. Boxes partly or wholly outside the
array are filled with zeros and still count their full size.
"""

from __future__ import annotations

import llvmlite.ir as lir

from buildtile.backends.common.llvm import I32, I64, VOID, asm
from buildtile.backends.tile.hopper.select import HopperPlan, TmaOperand
from buildtile.interop.abi import PtxParam, tensor_map_param


def map_params(plan: HopperPlan) -> list[PtxParam]:
    """The entry's tensor-map parameters, in the order of ``plan.maps()``."""
    return [tensor_map_param(op.load.param) for op in plan.operands]


def copy_box(b: lir.IRBuilder, tensor_map: lir.Value, dst: lir.Value, col: lir.Value, row: lir.Value,
             barrier: lir.Value) -> None:
    """One box from element (``row``, ``col``) (i32) of the mapped array into shared address ``dst``,
    completing its bytes on the mbarrier at ``barrier``."""
    asm(b, VOID, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[$0], [$1, {$2, $3}], [$4];",
        "r,l,r,r,r,~{memory}", [dst, b.ptrtoint(tensor_map, I64), col, row, barrier], side_effect=True)


def copy_tile(b: lir.IRBuilder, op: TmaOperand, tensor_map: lir.Value, dst: lir.Value, origin: list[lir.Value],
              barrier: lir.Value) -> None:
    """The operand's whole tile at element ``origin`` (row, col; i64): one box per panel."""
    row = b.trunc(origin[0], I32)
    col = b.trunc(origin[1], I32)
    panels = op.panels
    for p in range(panels.count):
        copy_box(b, tensor_map, b.add(dst, I32(p * panels.panel_bytes)), b.add(col, I32(p * panels.panel_cols)),
                 row, barrier)
