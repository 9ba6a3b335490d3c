"""Generate the CMake side of the C ABI from the templates next to this module.

- the CMake project scikit-build-core builds (the shim library), and
- the package config a C++ host finds with ``find_package(<package> CONFIG)``.
"""

from __future__ import annotations

import re
from importlib import resources

from buildtile import __version__
from buildtile.interop import layout
from buildtile.interop.abi import ABI_VERSION
from buildtile.interop.c_model import Package


def template(name: str) -> str:
    """A file of ``buildtile/interop/templates``."""
    return (resources.files("buildtile.interop") / "templates" / name).read_text()


def render(name: str, **values: str) -> str:
    """A template with every ``@KEY@`` replaced (CMake's own ``${}`` stays as it is)."""
    text = template(name)
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    left = re.search(r"@[A-Z_]+@", text)
    if left:  # a template and this module out of step: a buildtile bug
        raise AssertionError(f"{name}: {left.group()} has no value")
    return text


def build_project(package: Package) -> str:
    """``CMakeLists.txt`` of the project that builds and installs the shim library."""
    return render(
        "CMakeLists.txt.in",
        PACKAGE=package.name,
        TARGET=layout.library_target(package.name),
        LIB_DIR=layout.LIB_DIR,
        BUILDTILE_VERSION=__version__,
    )


def package_config(package: Package) -> str:
    """``<package>Config.cmake``: the imported target ``<package>::kernels``."""
    return render(
        "Config.cmake.in",
        PACKAGE=package.name,
        INCLUDE_DIR=layout.INCLUDE_DIR,
        LIB_DIR=layout.LIB_DIR,
        LIBRARY=layout.library_filename(package.name),
        ABI_VERSION=str(ABI_VERSION),
        BUILDTILE_VERSION=__version__,
    )


def package_config_version(package: Package) -> str:
    """``<package>ConfigVersion.cmake``: the package's version in CMake's terms."""
    # CMake compares dotted numbers; PEP 440 suffixes (.dev1, +local) are dropped
    match = re.match(r"\d+(\.\d+){0,3}", package.version or "")
    return render("ConfigVersion.cmake.in", PACKAGE=package.name, VERSION=match.group() if match else "unknown")
