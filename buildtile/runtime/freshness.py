"""Never launching a kernel whose source changed since its build in place.

A tree built next to the package's sources (``buildtile build``, an editable
install) records the project it was built from, and each kernel the sha256
of its module file. The first time a kernel of a module is used, that file
is hashed once and compared: an edited module is refused with a BT0620 that
names the kernel and the command that rebuilds it, or, with
``BUILDTILE_EDITABLE_REBUILD=1`` and the compiler installed, rebuilt in place first
(as scikit-build-core's ``editable.rebuild`` does). An installed wheel
records no project, so it is never checked and needs no source file.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from buildtile.errors import BuildtileError
from buildtile.interop.manifest import PackageManifest

#: set to 1 to rebuild an in-place tree whose kernel sources changed, instead of refusing it
REBUILD_ENV = "BUILDTILE_EDITABLE_REBUILD"


@dataclass(frozen=True)
class StaleModule:
    """A kernel module whose file no longer is the one its kernels were compiled from."""

    module: str
    file: Path
    kernels: tuple[str, ...]


def stale_module(manifest: PackageManifest, package_dir: Path, module: str) -> StaleModule | None:
    """``module``'s kernels when its file differs from the one they were built from; None when it
    is the same, or nothing can be compared (no recorded hash, no source file next to the tree)."""
    records = [k for k in manifest.kernels if k.module == module and k.source is not None]
    if not records:
        return None
    source = records[0].source
    assert source is not None
    file = package_dir / source.package_file
    try:
        data = file.read_bytes()
    except OSError:
        return None  # only compiled modules next to the tree: nothing to compare with
    if hashlib.sha256(data).hexdigest() == source.sha256:
        return None
    return StaleModule(module, file, tuple(k.name for k in records))


def rebuild_wanted() -> bool:
    """Whether ``BUILDTILE_EDITABLE_REBUILD`` asks for stale in-place trees to be rebuilt."""
    return os.environ.get(REBUILD_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def rebuild_in_place(project: str) -> bool:
    """Compile the project at ``project`` in place again, as ``buildtile build`` does; False when
    the compiler is not installed (the runtime alone cannot rebuild)."""
    try:
        import buildtile.compiler  # noqa: F401  (LLVM and nvJitLink: absent from a runtime-only install)
        from buildtile.config import load_project
        from buildtile.hooks.staging import build_c_abi_in_place, install_in_place, stage_kernels
    except ImportError:
        return False

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log(f"buildtile: kernel sources changed since the last build of {project}; rebuilding ({REBUILD_ENV}=1)")
    loaded = load_project(project)
    staged = stage_kernels(loaded, log=log)
    install_in_place(loaded, staged)
    build_c_abi_in_place(loaded, staged, log=log)
    return True


def stale_error(package: str, stale: StaleModule, kernel: str, project: str, rebuild_failed: bool) -> BuildtileError:
    """BT0620 for launching ``kernel`` of a module edited since its build in place."""
    others = [k for k in stale.kernels if k != kernel]
    also = f" (and {', '.join(f'`{k}`' for k in others)} with it)" if others else ""
    why = (f"; {REBUILD_ENV} is set, but the compiler is not installed to rebuild it" if rebuild_failed
           else "")
    return BuildtileError(
        f"kernel `{stale.module}.{kernel}`{also} of package `{package}` is out of date: {stale.file} changed "
        f"since its kernels were built in place{why}",
        code="BT0620",
        help=f"rebuild them with `buildtile build {project}` (or `pip install -e {project}` for an editable "
             f"install); {REBUILD_ENV}=1 rebuilds automatically when the compiler is installed",
    )
