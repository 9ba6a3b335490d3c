"""Where the C ABI's files live inside an installed package.

One place for these names, so the emitter that writes them, the CMake
config that finds them and ``python -m <package> --cmake-dir`` agree::

    <package>/_buildtile/
        include/buildtile/abi.h, buildtile.hpp   the shared ABI and C++ layer
        include/<package>/kernels.h, kernels.hpp  this package's launchers
        lib/lib<package>_kernels.so              the shim library
        cmake/<package>Config.cmake              find_package(<package> CONFIG)
"""

from __future__ import annotations

INCLUDE_DIR = "include"
LIB_DIR = "lib"
CMAKE_DIR = "cmake"

#: the folder, inside the CMake build directory an emitter is given, that
#: holds the generated CMake project
CMAKE_PROJECT_DIR = "c_abi"


def library_target(package: str) -> str:
    """The CMake target (and library base name) of a package's shim."""
    return f"{package}_kernels"


def library_filename(package: str) -> str:
    return f"lib{library_target(package)}.so"


def config_filename(package: str) -> str:
    return f"{package}Config.cmake"


def config_version_filename(package: str) -> str:
    return f"{package}ConfigVersion.cmake"
