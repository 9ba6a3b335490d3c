"""``python -m <package> --cmake-prefix``: where a C/C++ host finds a package's kernels.

A package built with ``[tool.buildtile.c-abi]`` supports this with a two-line
``__main__.py``::

    from buildtile.interop.host_cli import package_main
    raise SystemExit(package_main("example_kernels"))

and a CMake host then does::

    cmake -DCMAKE_PREFIX_PATH="$(python -m example_kernels --cmake-prefix)" ...
    find_package(example_kernels CONFIG REQUIRED)   # example_kernels::kernels

(or ``-Dexample_kernels_DIR=$(python -m example_kernels --cmake-dir)``). A
scikit-build-core project needs neither: the wheel's ``cmake.prefix`` entry
point puts the same prefix on its ``CMAKE_PREFIX_PATH``.

The package is located without importing it, so this works where its
Python dependencies (or a GPU) are missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from buildtile.errors import BuildtileError
from buildtile.interop import layout
from buildtile.interop.manifest import MANIFEST_DIR


def buildtile_dir(package: str) -> Path:
    """``<package>/_buildtile`` of an installed package that carries a C ABI."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise BuildtileError(
            f"package {package!r} is not installed (no importable package of that name)",
            code="BT0620",
            help="install it with `pip install .` in its project, or check the name",
        )
    for location in locations:
        folder = Path(location) / MANIFEST_DIR
        if (folder / layout.CMAKE_DIR / layout.config_filename(package)).is_file():
            return folder
    raise BuildtileError(
        f"package {package!r} at {locations[0]} carries no C ABI "
        f"({MANIFEST_DIR}/{layout.CMAKE_DIR}/{layout.config_filename(package)} is missing)",
        code="BT0620",
        help="build it with `[tool.buildtile.c-abi] enabled = true` in its pyproject.toml",
    )


def cmake_prefix(package: str) -> str:
    """The prefix under which CMake's search finds ``cmake/<package>Config.cmake``,
    for ``CMAKE_PREFIX_PATH`` (the folder the wheel's ``cmake.prefix`` entry point names)."""
    return str(buildtile_dir(package))


def cmake_dir(package: str) -> str:
    """The folder holding ``<package>Config.cmake``, for ``-D<package>_DIR=``."""
    return str(buildtile_dir(package) / layout.CMAKE_DIR)


def include_dir(package: str) -> str:
    """The folder holding ``buildtile/abi.h`` and ``<package>/kernels.h(pp)``."""
    return str(buildtile_dir(package) / layout.INCLUDE_DIR)


def library_path(package: str) -> str:
    """The shim library, ``lib<package>_kernels.so``."""
    return str(buildtile_dir(package) / layout.LIB_DIR / layout.library_filename(package))


def package_main(package: str, argv: list[str] | None = None) -> int:
    """The command line of ``python -m <package>``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {package}",
        description=f"Locations of the C/C++ interface of {package}'s GPU kernels.",
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--cmake-prefix", action="store_const", const=cmake_prefix, dest="query",
                       help="prefix that finds the package's CMake config (for CMAKE_PREFIX_PATH)")
    which.add_argument("--cmake-dir", action="store_const", const=cmake_dir, dest="query",
                       help=f"folder of {layout.config_filename(package)} (for -D{package}_DIR=)")
    which.add_argument("--include-dir", action="store_const", const=include_dir, dest="query",
                       help="folder of buildtile/abi.h and the package's kernels.h / kernels.hpp")
    which.add_argument("--library", action="store_const", const=library_path, dest="query",
                       help=f"path of {layout.library_filename(package)}")
    args = parser.parse_args(argv)
    try:
        print(args.query(package))
    except BuildtileError as err:
        print(err, file=sys.stderr)
        return 1
    return 0
