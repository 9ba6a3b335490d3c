"""What a plugin registers: backends (compile one kernel kind) and emitters.

Plain dataclasses over plain data, so a third-party backend needs nothing
from buildtile's internals but these types.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol


@dataclass(frozen=True)
class KernelSource:
    """A kernel found by static discovery: its function's AST, never imported."""

    kind: str                     # backend kind, e.g. "simt"
    name: str                     # function name
    module: str                   # dotted module name, e.g. "example_kernels.ops"
    file: Path                    # absolute path of the module's source
    display_file: str             # path shown in diagnostics (relative to the project)
    node: ast.FunctionDef         # the kernel function
    decorator: ast.expr           # the decorator expression (`simt.kernel(block=256)`)
    module_ast: ast.Module        # the whole module, for constants and helpers
    lines: list[str]              # source lines, for diagnostics
    namespace: dict[str, str]     # local name -> dotted import target ("simt" -> "buildtile.simt")


@dataclass(frozen=True)
class CompileOptions:
    opt_level: int = 3
    checks: str = "release"       # or "debug"


@dataclass
class AnalyzedKernel:
    """A kernel that passed every build-time check, ready to lower per target."""

    source: KernelSource
    symbol: str                   # PTX entry name
    params: list[dict]            # manifest parameter records
    contract: dict                # manifest contract record
    ir: Any                       # the backend's own checked IR
    extra: dict = field(default_factory=dict)


class BackendImpl(Protocol):
    def analyze(self, source: KernelSource, options: CompileOptions) -> AnalyzedKernel:
        """Type-check and run ownership checks; raise CompileError with diagnostics."""

    def to_ptx(self, kernel: AnalyzedKernel, target: str, options: CompileOptions) -> str:
        """Lower a checked kernel to PTX text for one ``sm_XX`` target."""


@dataclass(frozen=True)
class Backend:
    """A kernel kind: kernels decorated with ``<decorator_module>.kernel`` go to ``impl``."""

    kind: str
    decorator_module: str          # e.g. "buildtile.simt"
    impl: BackendImpl
    version: str = "0"


@dataclass(frozen=True)
class EmitResult:
    cmake_source_dir: Path | None = None   # a CMake project scikit-build-core should build


@dataclass(frozen=True)
class Emitter:
    """Writes interop files from the manifest.

    ``emit(manifest, package_out, build_dir, settings)`` writes files that go in
    the wheel under ``package_out`` (the package's ``_buildtile`` folder) and
    scratch files under ``build_dir``; it returns an :class:`EmitResult`.
    """

    name: str
    emit: Callable[[dict, Path, Path, Any], EmitResult]
    enabled: Callable[[Any], bool] = lambda settings: True
