"""The grid of tiles an output is cut into, and the launch grid that covers it (docs/tile.md).

Every block finds its tile from its linear block id ``x + nx * (y + ny * z)``
and the tile counts (the kernel side is buildtile/backends/tile/schedule.py),
so the host may launch any grid of at least that many blocks. The rule, which
the C host's ``bt_tile_grid`` (interop/templates/bt_tile.c) repeats:

1. the **natural grid** -- the last axis's tile count along x, the one before
   along y, the first of three along z -- when each fits CUDA's limits (it is
   what every launch used before grids were linearised, and the cheapest);
2. else, for two or three axes, the **linearised grid**: the tiles in
   row-major order, ``x = min(total, 2^31 - 1)`` and the rest spilled into y
   (up to 65,535), then z; the few blocks past the last tile return at once;
3. else (one axis of more than 2^31 - 1 tiles, or more blocks than x, y and z
   hold together) the launch is refused (BT0600).

A **persistent** launch (``tile.partition(..., persistent=True)``) uses
:func:`persistent_grid` instead: one wave of blocks along x, each looping
over the tiles ``b, b + P, ...``.
"""

from __future__ import annotations

import math

from buildtile.runtime.contract import MAX_GRID, Dim3


def tile_counts(shape: tuple[int, ...], tile_shape: tuple[int, ...]) -> tuple[int, ...]:
    """``ceil(shape[d] / tile_shape[d])`` per axis."""
    return tuple(-(-n // t) for n, t in zip(shape, tile_shape))


def natural_grid(counts: tuple[int, ...]) -> Dim3:
    """Tile axis rank-1 along x, rank-2 along y, rank-3 along z, and the axes before it (rank-4/5
    outputs) folded into z as well, axis rank-3 fastest: the row-major order the kernels decode
    from their linear block id (a rank-0 array is one tile)."""
    along_xyz = tuple(reversed(counts)) + (1, 1, 1)
    return along_xyz[0], along_xyz[1], math.prod(along_xyz[2:])


def launch_grid(counts: tuple[int, ...], limits: Dim3 = MAX_GRID) -> Dim3 | None:
    """The grid a launch over ``counts`` tiles uses (the module docstring's rule), or None when
    none fits ``limits`` (CUDA's; smaller ones only in tests). A 0 count gives a grid with a 0
    (no blocks: nothing to launch)."""
    natural = natural_grid(counts)
    if 0 in natural or all(n <= limit for n, limit in zip(natural, limits)):
        return natural
    if len(counts) < 2:
        return None
    total = 1
    for n in counts:
        total *= n
    x = min(total, limits[0])
    rest = -(-total // x)
    y = min(rest, limits[1])
    z = -(-rest // y)
    return (x, y, z) if z <= limits[2] else None


def tile_grid(shape: tuple[int, ...], tile_shape: tuple[int, ...], limits: Dim3 = MAX_GRID) -> Dim3 | None:
    """:func:`launch_grid` of the tiles of ``shape`` cut into ``tile_shape``."""
    return launch_grid(tile_counts(shape, tile_shape), limits)


#: threads one SM holds (every sm_80+ GPU) and blocks, and shared memory a block may use there
SM_THREADS = 2048
SM_BLOCKS = 32
SM_SHARED_BYTES = 227 * 1024


def blocks_per_sm(threads: int, shared_bytes: int) -> int:
    """About how many blocks of ``threads`` threads and ``shared_bytes`` of shared memory one SM
    runs at once (threads and shared memory; registers are the compiler's to fit)."""
    fit = min(SM_BLOCKS, SM_THREADS // max(1, threads))
    if shared_bytes:
        fit = min(fit, SM_SHARED_BYTES // shared_bytes)
    return max(1, fit)


def persistent_grid(counts: tuple[int, ...], sms: int, threads: int, shared_bytes: int) -> Dim3:
    """The grid of a persistent launch: ``min(tiles, sms * blocks_per_sm)`` blocks along x."""
    total = 1
    for n in counts:
        total *= n
    if total == 0:
        return 0, 1, 1
    return min(total, sms * blocks_per_sm(threads, shared_bytes), MAX_GRID[0]), 1, 1
