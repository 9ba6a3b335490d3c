"""The frameworks emitter: records what a package opted in to (``[tool.buildtile.torch]``,
``[tool.buildtile.jax]``) next to its manifest, where the runtime looks when the package is
imported (:mod:`buildtile.runtime.frameworks`), and with ``jax.ffi`` writes the package's XLA
FFI handlers (:mod:`buildtile.interop.jax_ffi`), which the runtime compiles on first use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from buildtile.backend import EmitResult, Emitter
from buildtile.config import TABLE
from buildtile.errors import ConfigError
from buildtile.interop.c_model import read_package
from buildtile.interop.jax_ffi import generate_ffi_source
from buildtile.runtime.frameworks import FRAMEWORKS_FILE, frameworks_record
from buildtile.runtime.frameworks.jax_ffi import FFI_SOURCE


def emit(manifest: dict, package_out: Path, build_dir: Path, settings: Any) -> EmitResult:
    if settings.jax.ffi and not settings.c_abi.enabled:
        raise ConfigError(
            f"{TABLE}.jax.ffi needs the C ABI, which is off",
            help="the XLA FFI handlers call the C ABI's launchers: add `enabled = true` under "
                 f"[{TABLE}.c-abi]",
        )
    record = frameworks_record(settings.torch.ops, settings.jax.ffi)
    (Path(package_out) / FRAMEWORKS_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    if settings.jax.ffi:
        source = Path(package_out) / FFI_SOURCE
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(generate_ffi_source(read_package(manifest, Path(package_out))))
    return EmitResult()


def _enabled(settings: Any) -> bool:
    return bool(settings.torch.ops or settings.jax.ffi)


FRAMEWORKS_EMITTER = Emitter(name="frameworks", emit=emit, enabled=_enabled)
