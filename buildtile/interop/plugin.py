"""Registers the C ABI emitter (shim library, C and C++ headers, CMake config)."""

from buildtile import hookimpl


@hookimpl
def buildtile_register_emitters(register):
    from buildtile.interop.c_abi import C_ABI_EMITTER

    register(C_ABI_EMITTER)
