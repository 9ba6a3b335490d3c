"""Compile a project's kernels into a staging folder that the wheel is packed from.

The staging folder is ``build/buildtile/`` in the project: the compiler
writes ``<package>/_buildtile/`` (manifest, cubins, PTX, interop files) there
and keeps its scratch files beside it, so they survive between builds;
``kernels-cmake/`` is the kernels' entry point for a project that builds with
a CMakeLists.txt of its own (:mod:`buildtile.hooks.cmake_entry`). The
folder ignores itself in version control, which also keeps it out of sdists.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from buildtile.config import Project
from buildtile.hooks.cmake_entry import write_entry_point
from buildtile.interop.manifest import MANIFEST_DIR, MANIFEST_NAME, mark_in_place

STAGING_DIR = Path("build") / "buildtile"
#: marks a folder buildtile writes, so git (and scikit-build-core's sdist, which reads
#: .gitignore files) leaves it alone
SELF_IGNORE = "# written by buildtile; safe to delete\n*\n"


#: the folder, in the staging folder, of the kernels' entry point for a project's own CMake build
CMAKE_ENTRY_DIR = "kernels-cmake"


@dataclass(frozen=True)
class StagedKernels:
    """What one compilation left in the staging folder."""

    artifacts_dir: Path              # <staging>/<package>/_buildtile: goes in the wheel as is
    cmake_source_dir: Path | None    # a CMake project for scikit-build-core to build, if any
    manifest: dict
    #: the kernels' entry point for a project that has a CMakeLists.txt of its own
    #: (BUILDTILE_KERNELS_DIR; see buildtile.hooks.cmake_entry)
    cmake_entry_dir: Path | None = None


def staging_dir(project: Project) -> Path:
    return project.root / STAGING_DIR


def stage_kernels(project: Project, log: Callable[[str], None], emit: tuple = ()) -> StagedKernels:
    """Compile every kernel of ``project`` into the staging folder (``emit``: stages whose
    text also goes there, see :mod:`buildtile.stages`)."""
    from buildtile.compiler import compile_project

    out_dir = staging_dir(project)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / ".gitignore").write_text(SELF_IGNORE)
    # compile_project replaces <package>/_buildtile as a whole, so nothing from an
    # earlier build (a kernel removed since) reaches the wheel
    manifest = compile_project(project, out_dir, log=log, emit=emit)
    cmake_dirs = [Path(d) for d in manifest.pop("_cmake_source_dirs", [])]
    artifacts_dir = out_dir / project.package / MANIFEST_DIR
    return StagedKernels(
        artifacts_dir=artifacts_dir,
        cmake_source_dir=_one_cmake_project(cmake_dirs, out_dir / "cmake", project.package),
        manifest=manifest,
        cmake_entry_dir=write_entry_point(out_dir / CMAKE_ENTRY_DIR, project, artifacts_dir, cmake_dirs),
    )


def _one_cmake_project(source_dirs: list[Path], folder: Path, package: str) -> Path | None:
    """scikit-build-core builds one CMake project; several emitters' projects become
    subdirectories of a generated top-level one."""
    if len(source_dirs) <= 1:
        return source_dirs[0] if source_dirs else None
    lines = [
        "cmake_minimum_required(VERSION 3.18)",
        f"project({package}_buildtile LANGUAGES NONE)",
    ]
    for index, source_dir in enumerate(source_dirs):
        lines.append(f'add_subdirectory("{source_dir.resolve().as_posix()}" "emitter{index}")')
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "CMakeLists.txt").write_text("\n".join(lines) + "\n")
    return folder


def install_in_place(project: Project, staged: StagedKernels) -> Path:
    """Copy the staged ``_buildtile`` tree next to the package's sources.

    An editable install imports the package from its source folder, so that is
    where the runtime looks for the manifest and the kernel images. The copy
    ignores itself in version control.
    """
    target = project.package_dir / MANIFEST_DIR
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(staged.artifacts_dir, target)
    (target / ".gitignore").write_text(SELF_IGNORE)
    # so the runtime refuses kernels whose source was edited since this build
    mark_in_place(target / MANIFEST_NAME, project.root)
    return target


def build_c_abi_in_place(project: Project, staged: StagedKernels, log: Callable[[str], None]) -> Path | None:
    """Build the C shim library with CMake into the package's ``_buildtile/lib``.

    What scikit-build-core does for a wheel, done directly for ``buildtile build``,
    so a C/C++ host of an editable install links kernels as fresh as the Python side.
    """
    if staged.cmake_source_dir is None:
        return None
    import subprocess

    cmake = shutil.which("cmake")
    if cmake is None:
        from buildtile.errors import ToolchainError

        raise ToolchainError("the C ABI library needs CMake, and none is on PATH", help="pip install cmake")
    build_dir = staging_dir(project) / "cmake-build"
    prefix = project.package_dir.parent
    for cmd in ([cmake, "-S", str(staged.cmake_source_dir), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                 f"-DCMAKE_INSTALL_PREFIX={prefix}"],
                [cmake, "--build", str(build_dir)],
                [cmake, "--install", str(build_dir)]):
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            from buildtile.errors import ToolchainError

            raise ToolchainError(f"`{' '.join(cmd)}` failed:\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    library_dir = project.package_dir / MANIFEST_DIR / "lib"
    log(f"built the C ABI library into {library_dir}")
    return library_dir
