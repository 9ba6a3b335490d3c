"""What a plugin registers: backends (compile one kernel kind) and emitters.

A backend contributes these stages; the build driver runs them in this order
and knows a backend through nothing else:

1. ``analyze``: kernel source -> :class:`AnalyzedKernel` (manifest params and
   contract; every build-time check has run).
2. ``entries``: analysed kernel -> its :class:`CompileEntry` list, one per PTX
   entry point (one per tile specialisation for tile kernels), each with its
   LLVM IR and its part of the manifest record.
3. ``check_target``: one entry and one target -> diagnostics; where a backend
   refuses a target (``tile.mma`` needs sm_80) with a located diagnostic.
4. PTX: the driver's common LLVM IR -> PTX, or the backend's ``ptx`` for
   entries that come without LLVM IR.
5. cubin: the driver (nvJitLink).

Plain dataclasses over plain data, so a third-party backend needs nothing
from buildtile's internals but these types.
"""

from __future__ import annotations

import ast
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from buildtile.diagnostics import Diagnostic
from buildtile.errors import BuildtileError


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
    #: ``[tool.buildtile.tile.specialize]`` as JSON: the products tile kernels name; "" reads the
    #: nearest pyproject.toml (a file checked outside a project)
    tile_specialize: str = ""
    #: the project's targets, for entries only some targets get (the TMA entries of sm_90a);
    #: () when unknown, and then no such entry is made
    targets: tuple[str, ...] = ()


@dataclass
class AnalyzedKernel:
    """A kernel that passed every build-time check, ready to lower per target.

    Every field but ``ir`` is read by the driver and ends up in the manifest
    record; ``ir`` belongs to the backend alone.
    """

    source: KernelSource
    symbol: str                   # PTX entry name (a tile kernel's: its first specialisation's)
    params: list[dict]            # manifest parameter records
    contract: dict                # manifest contract record
    ir: Any                       # the backend's own checked IR
    #: debug builds: every checked read, numbered as the kernel reports them (manifest ``bounds_sites``)
    bounds_sites: list[dict] | None = None
    #: tile kernels: the Out parameter whose tiles make the grid (manifest ``tile.grid_param``);
    #: a kernel that has one gets a ``tile`` record with one specialisation per entry
    grid_param: str | None = None
    #: the record element types its parameters name as dtypes: name -> layout (manifest ``records``)
    records: dict[str, dict] = field(default_factory=dict)


@dataclass(frozen=True)
class CompileEntry:
    """One PTX entry point of a kernel, compiled for every target."""

    symbol: str                   # PTX entry name
    llvm_ir: str | None           # the same for every target; None: the backend's ``ptx`` writes the PTX
    #: names the entry among its kernel's (stage folders, progress lines); "" for a kernel's only entry
    label: str = ""
    #: a tile specialisation's manifest record, less its ``artifacts``; None for a kernel's only entry
    specialization: dict | None = None
    #: bytes every array argument's data pointer is aligned to for the host to launch this entry
    #: rather than its kernel's first (manifest ``aligned``); 0 for an entry that assumes nothing
    pointer_align: int = 0
    #: the only targets it is built for (those of its kernel's targets that are listed); () every target
    targets: tuple[str, ...] = ()
    #: the symbol of the tile specialisation whose TMA entry this is (manifest ``tma`` in that
    #: specialisation, its record less ``symbol`` and ``artifacts`` in ``specialization``); "" for none
    tma_of: str = ""


class BackendImpl(ABC):
    """The stages one kernel kind contributes, in the order the driver calls them.

    Subclass it; the driver calls these methods and nothing else.
    """

    @abstractmethod
    def analyze(self, source: KernelSource, options: CompileOptions) -> AnalyzedKernel:
        """Type-check and run ownership checks; raise ``CompileError`` with every diagnostic."""

    @abstractmethod
    def entries(self, kernel: AnalyzedKernel, options: CompileOptions) -> list[CompileEntry]:
        """Every PTX entry point of an analysed kernel, with its LLVM IR, in manifest order.

        The first entry's symbol is ``kernel.symbol``.
        """

    def check_target(self, kernel: AnalyzedKernel, entry: CompileEntry, target: str,
                     options: CompileOptions) -> list[Diagnostic]:
        """Why ``entry`` cannot be built for ``target`` (``sm_XX``), as located diagnostics.

        Called for every target of the project, before anything is compiled;
        the default refuses none.
        """
        return []

    def ptx(self, kernel: AnalyzedKernel, entry: CompileEntry, target: str, options: CompileOptions) -> str:
        """PTX of an entry that has no LLVM IR; entries with LLVM IR get the driver's.

        Only a backend whose entries come without LLVM IR overrides it.
        """
        raise BuildtileError(f"kernel `{kernel.source.module}.{kernel.source.name}` has an entry `{entry.symbol}` "
                             f"without LLVM IR, and its backend `{kernel.source.kind}` writes no PTX of its own",
                             code="BT0030", help="the backend's `entries` gives LLVM IR, or it overrides `ptx`")

    def typed_ir(self, kernel: AnalyzedKernel, entry: CompileEntry) -> str | None:
        """A readable text of the entry's typed IR (``--emit typed-ir``); None: the backend shows none."""
        return None


@dataclass(frozen=True)
class Stage:
    """One stage whose text ``buildtile build --emit`` writes and ``buildtile inspect --stage`` prints."""

    name: str                     # as the command line spells it
    per_target: bool              # one text per target, or one for every target
    what: str


#: the stages a build can show, in pipeline order
STAGES: tuple[Stage, ...] = (
    Stage("typed-ir", False, "the backend's typed IR of each entry"),
    Stage("llvm", False, "LLVM IR, the same for every target"),
    Stage("ptx", True, "PTX for one target"),
)


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
