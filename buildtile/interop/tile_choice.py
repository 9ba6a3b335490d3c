"""Which compiled specialization a launch gets when its output is partitioned without a tile shape.

``tile.partition(z)`` (Python) or a null ``tile_shape`` (C, C++) leaves the
choice to the runtime. Among the specializations compiled for the arguments'
dtypes, rule ``fewest-padded-v1`` ranks each by, in order:

1. launchable: its grid fits CUDA's limits for the grid output's extents;
2. the fewest padded elements: ``prod(cdiv(n, t) * t) - prod(n)`` over the
   grid output's axes (masked work, and a smaller tile where a larger one
   would mostly be padding);
3. enough tiles to fill the GPU: at least ``fill_tiles`` of them (two waves
   of a 132-SM Hopper), so small outputs prefer more, smaller tiles;
4. larger tiles (fewer blocks, longer rows on chip);
5. the order the specializations are listed in.

The rule's name and ``fill_tiles`` are written in the manifest (``tile.choice``);
the C shim implements the same ranking (``bt_tile_choose`` in bt_tile.c),
and a table test checks the two hosts agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

CHOICE_RULE = "fewest-padded-v1"
#: tiles enough to fill the GPU: two waves of 132 SMs
FILL_TILES = 264
#: what a manifest's ``tile.choice`` holds
CHOICE_RECORD = {"rule": CHOICE_RULE, "fill_tiles": FILL_TILES}
#: CUDA's grid limits along x, y, z (axis rank-1 of the tile grid runs along x)
GRID_LIMITS = (2**31 - 1, 65535, 65535)


def rank_key(extents: Sequence[int], tile_shape: Sequence[int], index: int,
             fill_tiles: int = FILL_TILES) -> tuple:
    """The sort key of one candidate (smaller is better)."""
    counts = [-(-n // t) for n, t in zip(extents, tile_shape)]
    launchable = all(c <= limit for c, limit in zip(reversed(counts), GRID_LIMITS))
    padded = math.prod(c * t for c, t in zip(counts, tile_shape)) - math.prod(extents)
    tiles = math.prod(counts)
    return (0 if launchable else 1, padded, 0 if tiles >= fill_tiles else 1, -math.prod(tile_shape), index)


def choose(extents: Sequence[int], candidates: Sequence[tuple[int, Sequence[int]]],
           fill_tiles: int = FILL_TILES) -> int:
    """The index of the best candidate ``(index, tile shape of the grid output)`` for ``extents``."""
    return min(candidates, key=lambda c: rank_key(extents, c[1], c[0], fill_tiles))[0]
