"""The C ABI emitter: shim library, headers and CMake package config of a package.

Given the manifest and the compiled artifacts under ``<package>/_buildtile``,
:func:`emit` writes

- into the package (shipped in the wheel): ``include/buildtile/abi.h``,
  ``include/buildtile/buildtile.hpp``, ``include/<package>/kernels.h``,
  ``include/<package>/kernels.hpp`` and ``cmake/<package>Config.cmake`` (+
  ``ConfigVersion``);
- into the build directory: a CMake project that builds
  ``lib<package>_kernels.so`` and installs it into
  ``<package>/_buildtile/lib`` (scikit-build-core builds it).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from buildtile.backend import EmitResult, Emitter
from buildtile.interop import cmake_files, layout
from buildtile.interop.c_headers import generate_c_header, generate_cpp_header
from buildtile.interop.c_model import read_package
from buildtile.interop.c_shim import generate_shim

#: headers that ship unchanged with every package
SHARED_HEADERS = ("abi.h", "buildtile.hpp")
#: the runtime compiled into every shim library, next to the generated kernels.c
RUNTIME_SOURCES = ("bt_runtime.h", "bt_checks.c", "bt_launch.c", "bt_tile.c")


def shared_header(name: str) -> str:
    return (resources.files("buildtile") / "include" / "buildtile" / name).read_text()


def emit(manifest: dict, package_out: Path, build_dir: Path, settings: Any = None) -> EmitResult:
    """Write the C ABI of the package whose ``_buildtile`` folder is ``package_out``.

    Reads each artifact from ``package_out / artifact["path"]``; returns the
    CMake project (under ``build_dir``) that builds the shim library.
    """
    package_out, build_dir = Path(package_out), Path(build_dir)
    package = read_package(manifest, package_out)
    name = package.name
    c_header = generate_c_header(package)

    include = package_out / layout.INCLUDE_DIR
    for header in SHARED_HEADERS:
        write_if_changed(include / "buildtile" / header, shared_header(header))
    write_if_changed(include / name / "kernels.h", c_header)
    write_if_changed(include / name / "kernels.hpp", generate_cpp_header(package))
    cmake = package_out / layout.CMAKE_DIR
    write_if_changed(cmake / layout.config_filename(name), cmake_files.package_config(package))
    write_if_changed(cmake / layout.config_version_filename(name), cmake_files.package_config_version(package))

    project = build_dir / layout.CMAKE_PROJECT_DIR
    write_if_changed(project / "CMakeLists.txt", cmake_files.build_project(package))
    write_if_changed(project / "src" / "kernels.c", generate_shim(package))
    for source in RUNTIME_SOURCES:
        write_if_changed(project / "src" / source, cmake_files.template(source))
    write_if_changed(project / "include" / "buildtile" / "abi.h", shared_header("abi.h"))
    write_if_changed(project / "include" / name / "kernels.h", c_header)
    return EmitResult(cmake_source_dir=project)


def write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` unless ``path`` already holds it, so unchanged files keep their
    timestamps and an incremental CMake build recompiles nothing."""
    if path.is_file() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _enabled(settings: Any) -> bool:
    return bool(settings.c_abi.enabled)


C_ABI_EMITTER = Emitter(name="c-abi", emit=emit, enabled=_enabled)
