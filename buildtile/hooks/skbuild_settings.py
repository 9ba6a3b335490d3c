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
- ``wheel.packages``: the kernels' import package, found from
  ``[tool.buildtile].kernels`` (flat or src layout), so the distribution
  name need not match it.

The user's own settings win: anything the project sets in
``[tool.scikit-build]`` or passes with ``-C`` is left alone, except where it
would drop the C shim the wheel's headers promise (then it is an error).
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
from buildtile.hooks.staging import StagedKernels
from buildtile.interop.manifest import MANIFEST_DIR

ConfigSettings = dict[str, Any]

#: The minimum CMake of the generated C ABI project; used before that project exists
#: (requirements, metadata), after which scikit-build-core reads its CMakeLists.txt.
C_ABI_CMAKE_VERSION = ">=3.18"
#: scikit-build-core's own floor; passed when there is no CMake project at all, so it
#: does not look for a CMakeLists.txt to read a minimum version from
NO_CMAKE_VERSION = ">=3.15"
SKBUILD_PREFIX = "skbuild."

#: settings buildtile must control while the C ABI is on
C_ABI_OWNED = ("wheel.cmake", "cmake.source-dir")


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
        return key in user or SKBUILD_PREFIX + key in user or _dig(table, key) is not None

    ours: ConfigSettings = {}

    def default(key: str, value: str | list[str]) -> None:
        if not user_sets(key):
            ours[key] = value

    c_abi = project.settings.c_abi.enabled
    if c_abi:
        for key in C_ABI_OWNED:
            if user_sets(key):
                raise ConfigError(
                    f"{_where_set(key, user, project.pyproject)} conflicts with "
                    f"tool.buildtile.c-abi.enabled = true in {project.pyproject}",
                    help="buildtile builds the C ABI shim with scikit-build-core's CMake step; "
                    f"remove {key}, or set tool.buildtile.c-abi.enabled = false",
                )
        ours["wheel.cmake"] = "true"
        default("wheel.py-api", "py3")
    else:
        default("wheel.cmake", "false")

    cmake_source_dir = staged.cmake_source_dir if staged else None
    if cmake_source_dir is not None:
        ours["cmake.source-dir"] = str(cmake_source_dir)
    else:
        configured = Path(_dig(table, "cmake.source-dir") or user.get("cmake.source-dir") or ".")
        if not (project.root / configured / "CMakeLists.txt").is_file():
            default("cmake.version", C_ABI_CMAKE_VERSION if c_abi else NO_CMAKE_VERSION)

    default("wheel.packages", [_relative(project.package_dir, project.root)])

    if staged is not None and include_artifacts:
        ours[f"wheel.force-include.{staged.artifacts_dir}"] = f"{project.package}/{MANIFEST_DIR}"
    return {**user, **ours}


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


def _where_set(key: str, user: Mapping[str, Any], pyproject: Path) -> str:
    if key in user or SKBUILD_PREFIX + key in user:
        return f"config setting {key}"
    return f"tool.scikit-build.{key} in {pyproject}"


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()
