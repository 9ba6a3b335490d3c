"""The grid of tiles an output is cut into, and the launch grid of one block per tile (docs/tile.md)."""

from __future__ import annotations

import math

from buildtile.runtime.contract import Dim3


def tile_counts(shape: tuple[int, ...], tile_shape: tuple[int, ...]) -> tuple[int, ...]:
    """``ceil(shape[d] / tile_shape[d])`` per axis."""
    return tuple(-(-n // t) for n, t in zip(shape, tile_shape))


def tile_grid(shape: tuple[int, ...], tile_shape: tuple[int, ...]) -> Dim3:
    """The launch grid of one block per tile: axis rank-1 along x, rank-2 along y, rank-3 along z;
    the axes before rank-3 of a rank-4/5 output fold into z too (axis rank-3 fastest), as the
    kernels unfold them.

    A rank-0 array is one tile. An empty axis gives a 0 (no blocks: nothing to launch).
    """
    counts = tile_counts(shape, tile_shape)
    along_xyz = tuple(reversed(counts)) + (1, 1, 1)
    return along_xyz[0], along_xyz[1], math.prod(along_xyz[2:])
