"""Outputs of different ranks in one kernel: the primary output and those that follow it.

The grid is one block per tile of the *primary* output: the first
``tile.Out`` parameter of the highest rank. An output of lower rank ``r``
(per-row statistics beside a 2-D result) *follows* it: its axes are the
primary's leading ``r`` axes, its tile ids are the primary's along them, and
its tile shape must be the primary's there (otherwise which of its tiles a
block owns is ambiguous: BT0308). The blocks that differ only along the
primary's other axes share one tile of the follower, so the lowering lets
only the first of them (tile 0 along each of those axes) store it: each
follower tile has exactly one writer, whatever the launch.
"""

from __future__ import annotations

from buildtile.backends.tile.types import TileIdT


def primary_output(outs: list) -> object:
    """The output whose partition fixes the grid: the first ``tile.Out`` of the highest rank."""
    rank = max(p.ty.rank for p in outs)
    return next(p for p in outs if p.ty.rank == rank)


def followers(tile_shapes: dict[str, tuple[int, ...]]) -> dict[str, str]:
    """Each output of lower rank than the primary (the first in ``tile_shapes``) -> the primary."""
    primary = next(iter(tile_shapes), None)
    if primary is None:
        return {}
    rank = len(tile_shapes[primary])
    return {name: primary for name, shape in tile_shapes.items() if len(shape) < rank}


def shape_mismatch(primary: str, primary_shape: tuple[int, ...], name: str, shape: tuple[int, ...]) -> str | None:
    """Why output ``name`` cannot follow ``primary`` along its leading axes, or None where it can."""
    lead = tuple(primary_shape[:len(shape)])
    if tuple(shape) == lead:
        return None
    return (f"`{name}` follows `{primary}` along {'axis 0' if len(shape) == 1 else f'axes 0..{len(shape) - 1}'}, "
            f"so its tile shape must be {lead} (`{primary}`'s there), not {tuple(shape)}")


def owns_through(idx_ty, param: str, axis: int, tile_shapes: dict[str, tuple[int, ...]]) -> bool:
    """Whether a store index of type ``idx_ty`` names ``param``'s own tile along ``axis`` through the
    primary's tile id (a follower's tile ids are the primary's along its axes)."""
    primary = followers(tile_shapes).get(param)
    return primary is not None and idx_ty == TileIdT(primary, axis)


def why_not_followed(idx_ty, param: str, axis: int, tile_shapes: dict[str, tuple[int, ...]]) -> str | None:
    """For a follower indexed by another of the primary's tile ids: which one its axis follows."""
    primary = followers(tile_shapes).get(param)
    if primary is None or not (isinstance(idx_ty, TileIdT) and idx_ty.param == primary):
        return None
    return (f"axis {axis} of `{param}` follows axis {axis} of `{primary}`; `{primary}.tile_id({idx_ty.axis})` "
            f"names a tile that blocks along axis {idx_ty.axis} of `{primary}` share")
