"""The interop plugin: the C ABI emitter (shim library, C and C++ headers, CMake config)
and the type stubs of each kernel module."""

from pathlib import Path

from buildtile import hookimpl


@hookimpl
def buildtile_register_emitters(register):
    from buildtile.interop.c_abi import C_ABI_EMITTER
    from buildtile.interop.frameworks import FRAMEWORKS_EMITTER

    register(C_ABI_EMITTER)
    register(FRAMEWORKS_EMITTER)


@hookimpl
def buildtile_after_package(project, manifest: dict, out_dir: Path) -> None:
    # stubs need each module's source (its other public names), which only the project
    # knows; an emitter sees the manifest alone
    from buildtile.interop.stubs import write_stubs

    write_stubs(project.source_root, manifest, out_dir)
