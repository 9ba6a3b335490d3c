"""The config settings buildtile hands to scikit-build-core.

scikit-build-core packages the wheel; buildtile tells it, through PEP 517
config settings, what to add to its usual job:

- ``wheel.force-include.<staged _buildtile folder> = <package>/_buildtile``:
  the compiled kernels and the manifest go in the wheel as they were staged
  (a dict-typed setting: one ``-C`` entry per key, merged with the project's
  own ``[tool.scikit-build.wheel.force-include]`` table).
- ``wheel.cmake``: true only when an interop emitter produced a CMake project
  (the C ABI shim), which ``cmake.source-dir`` then points at; its install
  step puts the library under ``<package>/_buildtile/lib``. A shim that does
  not link to Python makes the wheel ``py3-none-<platform>``
  (``wheel.py-api = "py3"``); without one the wheel is pure.
- A project with a ``CMakeLists.txt`` of its own (in its folder, or in the
  ``cmake.source-dir`` it sets) keeps it: scikit-build-core builds the user's
  project as usual, and ``cmake.define.BUILDTILE_KERNELS_DIR`` names the
  kernels' entry point, which that project adds with ``add_subdirectory``
  to link ``<package>::kernels`` (:mod:`buildtile.hooks.cmake_entry`). The
  wheel's tags are then scikit-build-core's own.
- ``wheel.packages``: the kernels' import package, found from
  ``[tool.buildtile].kernels`` (flat or src layout), so the distribution
  name need not match it.

The user's own settings win: anything the project sets in
``[tool.scikit-build]`` or passes with ``-C`` is left alone, except where it
would drop the C shim the wheel's headers promise (then it is an error), and
``cmake.define.BUILDTILE_KERNELS_DIR``, which is buildtile's.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from buildtile.config import CONFIG_SETTINGS_PREFIX, Project
from buildtile.errors import ConfigError
from buildtile.hooks.cmake_entry import ADD_SUBDIRECTORY, KERNELS_DIR_VARIABLE
from buildtile.hooks.staging import StagedKernels
from buildtile.interop import layout, stubs
from buildtile.interop.manifest import MANIFEST_DIR

ConfigSettings = dict[str, Any]

#: The minimum CMake of the generated C ABI project; used before that project exists
#: (requirements, metadata), after which scikit-build-core reads its CMakeLists.txt.
C_ABI_CMAKE_VERSION = ">=3.18"
#: scikit-build-core's own floor; passed when there is no CMake project at all, so it
#: does not look for a CMakeLists.txt to read a minimum version from
NO_CMAKE_VERSION = ">=3.15"
SKBUILD_PREFIX = "skbuild."

#: the define that hands the kernels' entry point to a project's own CMake build
KERNELS_DIR_DEFINE = f"cmake.define.{KERNELS_DIR_VARIABLE}"
#: how scikit-build-core spells false in a config setting
_FALSE = {"false", "0", "no", "off"}


def scikit_build_settings(
    project: Project,
    config_settings: Mapping[str, Any] | None,
    staged: StagedKernels | None = None,
    *,
    include_artifacts: bool = True,
) -> ConfigSettings:
    """scikit-build-core config settings for building ``project``.

    ``staged`` is what the kernel compilation left (``None`` for the hooks that run
    before it: requirements, metadata, sdist); ``include_artifacts`` is false for an
    editable install, which finds the artifacts next to the sources instead.
    """
    user = passthrough(config_settings)
    table = _scikit_build_table(project.pyproject)

    def user_sets(key: str) -> bool:
        return _user_value(key, user, table) is not None

    ours: ConfigSettings = {}

    def default(key: str, value: str | list[str]) -> None:
        if not user_sets(key):
            ours[key] = value

    c_abi = project.settings.c_abi.enabled
    own_cmake = own_cmake_project(project, config_settings)
    if user_sets(KERNELS_DIR_DEFINE):
        raise ConfigError(
            f"{_where_set(KERNELS_DIR_DEFINE, user, project.pyproject)} is buildtile's to set",
            help=f"remove it; buildtile defines {KERNELS_DIR_VARIABLE} for the project's CMakeLists.txt",
        )
    if c_abi:
        # the shim needs scikit-build-core's CMake step, and a CMake project to build it:
        # buildtile's own, or the project's (which adds the kernels' entry point)
        wheel_cmake = _user_value("wheel.cmake", user, table)
        if wheel_cmake is not None and (own_cmake is None or str(wheel_cmake).lower() in _FALSE):
            raise _c_abi_conflict(project, "wheel.cmake", user)
        if own_cmake is None and user_sets("cmake.source-dir"):
            raise _c_abi_conflict(
                project, "cmake.source-dir", user,
                why=f"{_user_value('cmake.source-dir', user, table)} has no CMakeLists.txt to build the C ABI "
                "shim from",
            )
        ours["wheel.cmake"] = "true"
        if own_cmake is None:
            default("wheel.py-api", "py3")
    elif own_cmake is None:
        default("wheel.cmake", "false")

    if own_cmake is not None:
        # the project's CMakeLists.txt stays scikit-build-core's source folder; the
        # kernels come in through add_subdirectory(${BUILDTILE_KERNELS_DIR})
        if staged is not None and staged.cmake_entry_dir is not None:
            ours[KERNELS_DIR_DEFINE] = str(staged.cmake_entry_dir)
    else:
        cmake_source_dir = staged.cmake_source_dir if staged else None
        if cmake_source_dir is not None:
            ours["cmake.source-dir"] = str(cmake_source_dir)
        else:
            default("cmake.version", C_ABI_CMAKE_VERSION if c_abi else NO_CMAKE_VERSION)

    default("wheel.packages", [_relative(project.package_dir, project.root)])

    if staged is not None and include_artifacts:
        ours[f"wheel.force-include.{staged.artifacts_dir}"] = f"{project.package}/{MANIFEST_DIR}"
        for stub, in_wheel in stubs.wheel_files(staged.artifacts_dir, project.package_dir).items():
            ours[f"wheel.force-include.{stub}"] = in_wheel
    return {**user, **ours}


def own_cmake_project(project: Project, config_settings: Mapping[str, Any] | None) -> Path | None:
    """The ``CMakeLists.txt`` of the project's own CMake build, if it has one.

    It is the one scikit-build-core would build: in ``cmake.source-dir`` when
    the project sets it (config setting or ``[tool.scikit-build]``), else in the
    project's folder.
    """
    configured = _user_value("cmake.source-dir", passthrough(config_settings), _scikit_build_table(project.pyproject))
    cmake_lists = project.root / str(configured or ".") / "CMakeLists.txt"
    return cmake_lists if cmake_lists.is_file() else None


def missing_c_abi_library(project: Project, wheel_members: list[str]) -> str | None:
    """What is wrong when a project's own CMake build left the C ABI shim out of its wheel.

    The wheel's headers and CMake config promise the library; a project whose
    CMakeLists.txt never adds the kernels' entry point (or installs only some
    components) would ship them without it.
    """
    library = f"{project.package}/{MANIFEST_DIR}/{layout.LIB_DIR}/{layout.library_filename(project.package)}"
    if library in wheel_members:
        return None
    return (
        f"the wheel has no {library}, which tool.buildtile.c-abi.enabled = true in {project.pyproject} "
        f"promises: the project's CMakeLists.txt did not build and install the kernels' C ABI"
    )


def passthrough(config_settings: Mapping[str, Any] | None) -> ConfigSettings:
    """The user's config settings minus buildtile's own (scikit-build-core rejects unknown keys)."""
    return {
        key: value
        for key, value in (config_settings or {}).items()
        if not key.startswith(CONFIG_SETTINGS_PREFIX)
    }


def _scikit_build_table(pyproject: Path) -> dict:
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    return data.get("tool", {}).get("scikit-build", {})


def _dig(table: Mapping[str, Any], dotted: str) -> Any:
    value: Any = table
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _user_value(key: str, user: Mapping[str, Any], table: Mapping[str, Any]) -> Any:
    """The project's own value of a scikit-build-core setting (config setting first), or None."""
    for name in (key, SKBUILD_PREFIX + key):
        if name in user:
            return user[name]
    return _dig(table, key)


def _c_abi_conflict(project: Project, key: str, user: Mapping[str, Any], why: str | None = None) -> ConfigError:
    return ConfigError(
        f"{_where_set(key, user, project.pyproject)} conflicts with "
        f"tool.buildtile.c-abi.enabled = true in {project.pyproject}" + (f": {why}" if why else ""),
        help="buildtile builds the C ABI shim with scikit-build-core's CMake step, alone or from the "
        f"project's own CMakeLists.txt through {ADD_SUBDIRECTORY}; "
        f"remove {key}, or set tool.buildtile.c-abi.enabled = false",
    )


def _where_set(key: str, user: Mapping[str, Any], pyproject: Path) -> str:
    if key in user or SKBUILD_PREFIX + key in user:
        return f"config setting {key}"
    return f"tool.scikit-build.{key} in {pyproject}"


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()
