"""Kernels inside the frameworks their users run: torch custom ops and JAX's FFI.

A package opts in at build time (``[tool.buildtile.torch] ops = true``,
``[tool.buildtile.jax] ffi = true``); the build records that in
``<package>/_buildtile/frameworks.json`` (:data:`FRAMEWORKS_FILE`). When a
kernel module of such a package is imported, each ``@simt.kernel`` and
``@tile.kernel`` calls :func:`kernel_defined`, which registers the kernel as a
``torch.library`` op when torch is installed. Nothing here imports torch or
JAX for a package that did not opt in, or on a machine without them: the thin
runtime depends on neither.
"""

from __future__ import annotations

import importlib.util
import json
from functools import lru_cache
from pathlib import Path

from buildtile.errors import BuildtileError, TypeMismatchError
from buildtile.interop.manifest import ParamRecord
from buildtile.runtime.dtypes import DISPLAY_NAMES

#: what the build writes next to the manifest of a package that opted in to a framework
FRAMEWORKS_FILE = "frameworks.json"


def frameworks_record(torch_ops: bool, jax_ffi: bool) -> dict:
    """The content of :data:`FRAMEWORKS_FILE` for these settings."""
    return {"torch": {"ops": bool(torch_ops)}, "jax": {"ffi": bool(jax_ffi)}}


def read_frameworks(artifact_dir: Path) -> dict:
    """What the package whose ``_buildtile`` folder is ``artifact_dir`` opted in to ({} when nothing)."""
    path = Path(artifact_dir) / FRAMEWORKS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise BuildtileError(f"{path} cannot be read: {exc}", code="BT0620",
                             help="rebuild or reinstall the package") from None
    return data if isinstance(data, dict) else {}


@lru_cache(maxsize=None)
def installed(module: str) -> bool:
    """Whether ``module`` (``"torch"``) can be imported here, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def wants_torch_ops(module: str) -> bool:
    """Whether the package of kernel module ``module`` was built with torch ops (False when it has no
    compiled kernels at all: such a kernel explains itself at its first launch)."""
    from buildtile.runtime.package import find_manifest

    try:
        manifest = find_manifest(module)
    except BuildtileError:
        return False
    return bool(read_frameworks(manifest.parent).get("torch", {}).get("ops"))


def kernel_defined(handle) -> None:
    """Called by the kernel decorators with each new kernel handle: registers it as a torch op when
    its package opted in and torch is installed."""
    if not installed("torch") or not wants_torch_ops(handle.pyfunc.__module__):
        return
    from buildtile.runtime.frameworks.torch_ops import register_kernel

    register_kernel(handle)


def array_mismatch(kernel: str, p: ParamRecord, dtype: str, shape: tuple, what: str) -> TypeMismatchError | None:
    """The refusal of a framework's ``what`` ("tensor", "array") of ``dtype`` (as torch and JAX
    name dtypes: ``float32``) and ``shape`` for parameter ``p``; None when it fits. An array of
    records is the records' bytes: uint8 or int8, its last extent the record's size."""
    rank = 1 if p.is_slice else p.rank
    if p.record is not None:
        fits = dtype in ("uint8", "int8") and len(shape) == rank + 1 and shape[-1] == p.record.size
        want = f"a {rank + 1}-d uint8 {what} of the records' bytes, its last extent {p.record.size}"
    else:
        fits = dtype == DISPLAY_NAMES[p.dtype] and len(shape) == rank
        want = f"a {rank}-d {DISPLAY_NAMES[p.dtype]} {what}"
    if fits:
        return None
    return TypeMismatchError(f"mismatched types: kernel `{kernel}` parameter `{p.name}` expects {p.type_text} "
                             f"({want}), got a {len(shape)}-d {dtype} {what} of shape {shape}")
