"""Registers the Tile backend, through the same entry-point group as any third-party backend."""

from buildtile import hookimpl


@hookimpl
def buildtile_register_backends(register):
    from buildtile.backends.tile.backend import TILE_BACKEND

    register(TILE_BACKEND)
