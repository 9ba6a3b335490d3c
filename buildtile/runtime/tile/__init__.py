"""The host side of Tile kernels: what ``@tile.kernel``, ``tile.partition`` and ``tile.tensor`` return.

One module a job, each importing only the ones above it in this list:

- :mod:`~buildtile.runtime.tile.grid` — the tiles an output is cut into and the launch grid
- :mod:`~buildtile.runtime.tile.handles` — ``TileTensor`` and ``Partition``, the owned handles
  a launch moves and gives back
- :mod:`~buildtile.runtime.tile.signature` — a kernel's manifest record and its specializations
- :mod:`~buildtile.runtime.tile.binding` — checking a launch's arguments
- :mod:`~buildtile.runtime.tile.launch` — ``PendingLaunch``, a checked launch not yet queued
- :mod:`~buildtile.runtime.tile.kernel` — ``TileKernel``, the launchable handle
"""
