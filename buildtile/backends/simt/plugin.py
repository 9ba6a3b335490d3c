"""Registers the SIMT backend, through the same entry-point group as any third-party backend."""

from buildtile import hookimpl


@hookimpl
def buildtile_register_backends(register):
    from buildtile.backends.simt.backend import SIMT_BACKEND

    register(SIMT_BACKEND)
