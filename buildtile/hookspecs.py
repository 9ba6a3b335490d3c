"""Every pluggy hook buildtile calls, in the order a build calls them.

Backends and interop emitters are plugins of the same kind: the built-in
ones are registered through the ``buildtile.backends`` entry-point group
exactly as a third-party package's would be.
"""

from __future__ import annotations

from pathlib import Path

import pluggy

hookspec = pluggy.HookspecMarker("buildtile")


@hookspec
def buildtile_register_backends(register) -> None:
    """Called once when the plugin manager starts.

    Call ``register(backend)`` with a :class:`buildtile.backend.Backend` for
    every kernel kind the plugin compiles (``Backend.kind`` is the decorator
    namespace, e.g. ``"simt"`` for ``@simt.kernel``). Its ``impl`` is a
    :class:`buildtile.backend.BackendImpl`, whose methods are the stages the
    build calls: ``analyze``, ``entries``, ``check_target``, and ``ptx`` for
    entries without LLVM IR; ``typed_ir`` for ``--emit typed-ir``.
    """


@hookspec
def buildtile_register_emitters(register) -> None:
    """Called once when the plugin manager starts.

    Call ``register(emitter)`` with a :class:`buildtile.backend.Emitter` that
    writes interop files (C shim, C++ header, stubs) from the manifest.
    """


@hookspec
def buildtile_before_discovery(project) -> None:
    """Called before the kernel modules are parsed; ``project`` is the settings."""


@hookspec
def buildtile_after_discovery(project, kernels: list) -> None:
    """Called with every discovered kernel (a list of ``KernelSource``)."""


@hookspec
def buildtile_before_compile(project, kernel, target: str) -> None:
    """Called once per compiled entry and target, after every kernel passed its checks
    (``analyze`` and every target's ``check_target``) and before any PTX is made;
    ``kernel`` is the ``AnalyzedKernel``."""


@hookspec
def buildtile_after_compile(project, kernel, target: str, artifact) -> None:
    """Called once per compiled entry and target, with its ``Artifact`` (the cubin)."""


@hookspec
def buildtile_after_package(project, manifest: dict, out_dir: Path) -> None:
    """Called once the manifest and artifacts are written under ``out_dir``."""
