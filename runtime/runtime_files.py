"""Which of buildtile's files make up the ``buildtile-runtime`` distribution.

The runtime is what a kernel package imports when its prebuilt kernels are
called: the kernel handles and launch path, the decorators and types its
kernel modules use, the manifest reader, the errors and their rendering, and
``python -m <package> --cmake-dir``. Everything else (the compiler, the
backends, the build hooks, the command line) is the ``buildtile``
distribution, which depends on this one. Both distributions are built from
the one ``buildtile/`` folder of the repository; ``runtime/setup.py`` and the
root ``setup.py`` each take their share of it from this list, so no file is
in both wheels and none is in neither.
"""

from __future__ import annotations

#: packages whose every module (and subpackage) is the runtime's
RUNTIME_PACKAGES = ("buildtile.runtime",)

#: single modules of other packages, as (package, module)
RUNTIME_MODULES = (
    ("buildtile", "__init__"),
    ("buildtile", "diagnostics"),
    ("buildtile", "errors"),
    ("buildtile", "random"),
    ("buildtile", "simt"),
    ("buildtile", "tile"),
    ("buildtile", "types"),
    ("buildtile.interop", "__init__"),
    ("buildtile.interop", "abi"),
    ("buildtile.interop", "driver_compat"),
    ("buildtile.interop", "host_cli"),
    ("buildtile.interop", "layout"),
    ("buildtile.interop", "manifest"),
    ("buildtile.interop", "record_layout"),
    ("buildtile.interop", "tile_choice"),
)


def in_runtime_package(package: str) -> bool:
    """True for a package all of whose modules are the runtime's."""
    return any(package == p or package.startswith(p + ".") for p in RUNTIME_PACKAGES)


def is_runtime_module(package: str, module: str) -> bool:
    """True for a module (``module`` in ``package``) that ships in ``buildtile-runtime``."""
    return in_runtime_package(package) or (package, module) in RUNTIME_MODULES
