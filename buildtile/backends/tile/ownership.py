"""Stage 2: ownership checks over the typed tile IR (typed -> checked).

The rules, in the spirit of Rust's borrow checker:

* ``Tensor`` parameters are shared borrows: never written (BT0594).
* A ``tile.Out`` parameter is split into tiles by its partition, and each
  block owns exactly one: a block stores only at its own tile. ``z.store(t)``
  always does; ``tile.store(z, index, t)`` only where ``index`` is provably
  ``(z.tile_id(0), ..., z.tile_id(rank - 1))`` -- the calls themselves, or
  names bound once to them (a reassigned name loses its ``TileIdT`` type in
  the typer) -- otherwise BT0499. The stored tile's shape is the tile shape
  (the typer checks), so a store cannot spill into a neighbour's tile.
* A block may also write its tile in chunks: ``tile.store(z, index, t)``
  with ``t`` smaller than the tile along an axis indexes in chunk units
  there, and ``index`` must provably stay among the block's own chunks
  (``chunks``: ``z.tile_id(axis) * r + k``, ``k`` bounded by ``r``).
"""

from __future__ import annotations

from buildtile.backend import KernelSource
from buildtile.backends.common.ownership import OwnershipReport, why_not_own
from buildtile.backends.tile import chunks, ir, outputs, scatter
from buildtile.backends.tile.types import ArrayT, TileIdT
from buildtile.diagnostics import Diagnostic


def check(kernel: ir.KernelIR, source: KernelSource) -> list[Diagnostic]:
    params = kernel.param_types
    checked = OwnershipReport(source)
    report = checked.report
    bindings = chunks.Bindings(kernel)

    for stmt in ir.walk_stmts(kernel.body):
        if not isinstance(stmt, ir.Store) or isinstance(stmt, scatter.AtomicAdd):
            continue     # atomic adds need no ownership: every block may add into every element
        ty = params[stmt.param]
        if isinstance(ty, ArrayT) and ty.atomic:
            report("BT0594", stmt.src, f"cannot store into `{stmt.param}`, a tile.Atomic output",
                   "every block may write it, so a plain store would race with the others",
                   f"add into it with `tile.atomic_add({stmt.param}, indices, t)`")
            continue
        if not (isinstance(ty, ArrayT) and ty.is_out):
            report("BT0594", stmt.src, f"cannot store into `{stmt.param}`, as `{stmt.param}` is read-only",
                   f"`{stmt.param}` is a {ty}",
                   f"write results into a tile.Out[{getattr(ty, 'elem', 'T')}, {getattr(ty, 'rank', 'rank')}] "
                   "parameter, partitioned on the host")
            continue
        if stmt.index is None:
            continue
        tile_shape = kernel.tile_shapes[stmt.param]
        for axis, idx in enumerate(stmt.index):
            per_tile = tile_shape[axis] // stmt.value.ty.shape[axis]
            if per_tile > 1:
                refusal = chunks.check_chunk_index(bindings, stmt, idx, axis, per_tile)
                if refusal is not None:
                    report("BT0499", refusal.node.src or idx.src or stmt.src,
                           f"chunk store outside this tile's own region: cannot store into `{stmt.param}` here",
                           refusal.label,
                           f"a tile of `{stmt.param}` holds {per_tile} chunks of {stmt.value.ty.shape[axis]} along "
                           f"axis {axis}: index them with `{stmt.param}.tile_id({axis}) * {per_tile} + k`, "
                           f"`k` in `tile.range({per_tile})`")
                    break
                continue
            if not (_is_own(idx, stmt.param, axis)
                    or outputs.owns_through(idx.ty, stmt.param, axis, kernel.tile_shapes)):
                report("BT0499", idx.src or stmt.src,
                       f"store outside this tile's own partition: cannot store into `{stmt.param}` here",
                       outputs.why_not_followed(idx.ty, stmt.param, axis, kernel.tile_shapes)
                       or _why_not_own(idx, stmt.param, axis),
                       f"a block stores only its own tile of `{stmt.param}`: write `{stmt.param}.store(t)`, "
                       f"or index with `{stmt.param}.tile_id({axis})` at position {axis}")
                break
    return checked.diagnostics


def _is_own(idx: ir.Expr, param: str, axis: int) -> bool:
    return isinstance(idx, (ir.TileId, ir.Var)) and idx.ty == TileIdT(param, axis)


def _why_not_own(idx: ir.Expr, param: str, axis: int) -> str:
    if isinstance(idx.ty, TileIdT):
        if idx.ty.param != param:
            return f"this is a tile id of `{idx.ty.param}`, not of `{param}`"
        return f"this is `{param}`'s tile id along axis {idx.ty.axis}, used for axis {axis}"
    return why_not_own(idx, f"`{param}.tile_id({axis})`", "tile", "block")
