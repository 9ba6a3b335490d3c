"""What the PEP 517 hooks of :mod:`buildtile.build` do.

Every hook runs in the project folder (PEP 517 guarantees it). The wheel
hooks compile the kernels into the staging folder first, so a kernel that
fails its checks stops the build before scikit-build-core writes anything;
then scikit-build-core packages the wheel with the settings of
:mod:`buildtile.hooks.skbuild_settings`. A project that builds its own
CMakeLists.txt (and with it the C ABI shim, through the kernels' entry
point) has its wheel checked for the shim afterwards. Last, the wheel and
the prepared metadata get what :mod:`buildtile.hooks.wheel_metadata` adds:
the runtime requirement, the CMake prefix entry point and the manylinux tag.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from buildtile.config import Project, load_project
from buildtile.errors import ConfigError, ToolchainError
from buildtile.hooks.cmake_entry import ADD_SUBDIRECTORY, kernels_target
from buildtile.hooks.skbuild_settings import missing_c_abi_library, own_cmake_project, scikit_build_settings
from buildtile.hooks.staging import StagedKernels, install_in_place, stage_kernels
from buildtile.hooks.wheel_metadata import finish_dist_info, finish_wheel
from buildtile.interop.manifest import MANIFEST_DIR

__all__ = ["build_editable", "build_sdist", "build_wheel", "get_requires", "prepare_metadata"]

ConfigSettings = Mapping[str, Any] | None


def build_wheel(
    wheel_directory: str, config_settings: ConfigSettings, metadata_directory: str | None
) -> str:
    from scikit_build_core import build as skbuild

    project = _project(config_settings)
    staged = _stage_kernels(project)
    settings = scikit_build_settings(project, config_settings, staged)
    with _build_tools_explained(project):
        # not metadata_directory: that holds buildtile's additions, which scikit-build-core would
        # take for a mismatch; the wheel gets the same ones below
        wheel_name = skbuild.build_wheel(wheel_directory, settings, None)
    wheel = Path(wheel_directory) / wheel_name
    _check_own_cmake_build(project, config_settings, wheel)
    return finish_wheel(wheel, project.package, c_abi=project.settings.c_abi.enabled).name


def build_editable(
    wheel_directory: str, config_settings: ConfigSettings, metadata_directory: str | None
) -> str:
    """Compile like a wheel, but leave the artifacts next to the sources.

    scikit-build-core's editable wheel maps the package to its source folder,
    where the runtime then finds ``_buildtile/``. A C shim library that CMake
    installed into the wheel is copied there too, so the tree is complete.
    """
    from scikit_build_core import build as skbuild

    project = _project(config_settings)
    staged = _stage_kernels(project)
    in_place = install_in_place(project, staged)
    settings = scikit_build_settings(project, config_settings, staged, include_artifacts=False)
    with _build_tools_explained(project):
        wheel_name = skbuild.build_editable(wheel_directory, settings, None)  # as in build_wheel
    wheel = Path(wheel_directory) / wheel_name
    _check_own_cmake_build(project, config_settings, wheel)
    _extract_package_artifacts(wheel, project.package, in_place)
    # an editable wheel is installed where it was built: its tag stays scikit-build-core's
    return finish_wheel(wheel, project.package, c_abi=project.settings.c_abi.enabled, retag=False).name


def build_sdist(sdist_directory: str, config_settings: ConfigSettings) -> str:
    from scikit_build_core import build as skbuild

    project = _project(config_settings)  # a broken configuration fails here, not at install
    return skbuild.build_sdist(sdist_directory, scikit_build_settings(project, config_settings))


def get_requires(
    config_settings: ConfigSettings, state: Literal["wheel", "editable", "sdist"]
) -> list[str]:
    """scikit-build-core's requirements: CMake and Ninja only for the C shim, and
    only where no suitable ones are installed."""
    from scikit_build_core import build as skbuild

    project = _project(config_settings)
    settings = scikit_build_settings(project, config_settings)
    hook = {
        "wheel": skbuild.get_requires_for_build_wheel,
        "editable": skbuild.get_requires_for_build_editable,
        "sdist": skbuild.get_requires_for_build_sdist,
    }[state]
    return hook(settings)


def prepare_metadata(
    metadata_directory: str, config_settings: ConfigSettings, *, editable: bool
) -> str:
    """The wheel's ``.dist-info`` without compiling anything."""
    from scikit_build_core import build as skbuild

    project = _project(config_settings)
    settings = scikit_build_settings(project, config_settings)
    name = "prepare_metadata_for_build_editable" if editable else "prepare_metadata_for_build_wheel"
    prepare = getattr(skbuild, name, None)
    if prepare is not None:
        with _build_tools_explained(project):
            dist_info = prepare(metadata_directory, settings)
        finish_dist_info(Path(metadata_directory) / dist_info, project.package,
                         c_abi=project.settings.c_abi.enabled)
        return dist_info
    # scikit-build-core leaves this hook out when the metadata can depend on the
    # build's outcome; then the metadata is the built wheel's.
    build = build_editable if editable else build_wheel
    with tempfile.TemporaryDirectory() as wheel_dir:
        wheel = Path(wheel_dir) / build(wheel_dir, config_settings, None)
        return _extract_dist_info(wheel, Path(metadata_directory))


def _project(config_settings: ConfigSettings) -> Project:
    return load_project(Path.cwd(), config_settings=config_settings)


@contextlib.contextmanager
def _build_tools_explained(project: Project) -> Iterator[None]:
    """A missing CMake or Ninja says why it is needed, without scikit-build-core's traceback.

    Build isolation installs them (see :func:`get_requires`); a build without
    isolation uses what the environment has.
    """
    from scikit_build_core.errors import NotFoundError

    try:
        yield
    except NotFoundError as exc:
        why = (
            f"tool.buildtile.c-abi.enabled in {project.pyproject} builds a C shim library with CMake"
            if project.settings.c_abi.enabled
            else f"the CMake build configured in {project.pyproject} needs it"
        )
        raise ToolchainError(
            f"{exc}; {why}",
            help="install it into this environment (`pip install cmake ninja`), or build with build "
            "isolation, which provides it",
        ) from None


def _check_own_cmake_build(project: Project, config_settings: ConfigSettings, wheel: Path) -> None:
    """A project's own CMake build must have installed the C ABI shim the wheel's headers promise.

    A wheel without it is removed, so no tool picks it up.
    """
    if not project.settings.c_abi.enabled:
        return
    cmake_lists = own_cmake_project(project, config_settings)
    if cmake_lists is None:
        return  # buildtile's own shim project built it
    with zipfile.ZipFile(wheel) as archive:
        problem = missing_c_abi_library(project, archive.namelist())
    if problem is None:
        return
    wheel.unlink()
    raise ConfigError(
        problem,
        help=f"add the kernels to {cmake_lists} with `{ADD_SUBDIRECTORY}` and link "
        f"{kernels_target(project.package)}, and install every component (tool.scikit-build.install.components); "
        "or set tool.buildtile.c-abi.enabled = false",
    )


def _log(message: str) -> None:
    # stderr, flushed per line, as scikit-build-core reports: pip shows it live with -v (and
    # moves its spinner on each line without), `python -m build` always
    print(message, file=sys.stderr, flush=True)


def _stage_kernels(project: Project) -> StagedKernels:
    """Compile the kernels, with a line before and after: the compile is the build's long part."""
    from buildtile import __version__

    start = time.perf_counter()
    _log(f"*** buildtile {__version__}: compiling the kernels of {project.package}")
    staged = stage_kernels(project, log=_log)
    count, targets = len(staged.manifest["kernels"]), ", ".join(staged.manifest["targets"])
    _log(f"*** buildtile: compiled {count} kernel{'s' if count != 1 else ''} for {targets} "
         f"in {time.perf_counter() - start:.1f} s")
    return staged


def _extract_package_artifacts(wheel: Path, package: str, target: Path) -> None:
    prefix = f"{package}/{MANIFEST_DIR}/"
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.startswith(prefix) and not member.endswith("/"):
                destination = target / member[len(prefix):]
                destination.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as source, destination.open("wb") as sink:
                    shutil.copyfileobj(source, sink)
                mode = archive.getinfo(member).external_attr >> 16
                if mode:
                    destination.chmod(mode & 0o777)


def _extract_dist_info(wheel: Path, metadata_directory: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.namelist() if m.split("/")[0].endswith(".dist-info")]
        archive.extractall(metadata_directory, members)
    return members[0].split("/")[0]

