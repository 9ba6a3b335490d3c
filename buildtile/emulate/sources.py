"""Kernel entries lowered from their Python source, as the build lowers them.

An installed package keeps its kernel modules' sources; emulation lowers them
again with the compiler (the package's wheel carries no LLVM IR), so what
runs on the CPU is the IR its images were made from, for the same options.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from buildtile.backend import AnalyzedKernel, CompileEntry, CompileOptions
from buildtile.discovery import KernelModule, find_kernels
from buildtile.emulate.hostir import EmulationError, host_ir
from buildtile.emulate.lines import source_lines
from buildtile.emulate.machine import HostKernel
from buildtile.plugins import backends


@dataclass
class LoweredEntry:
    """One PTX entry of a kernel: its LLVM IR and the analyzed kernel it came from."""

    kind: str
    kernel: AnalyzedKernel
    entry: CompileEntry
    display_file: str


def module_entries(path: Path, module: str, options: CompileOptions | None = None) -> dict[str, LoweredEntry]:
    """Every entry of the kernels of the module ``module`` (source file ``path``), by PTX symbol."""
    return dict(_module_entries(Path(path).resolve(), module, options or CompileOptions()))


@lru_cache(maxsize=64)
def _module_entries(path: Path, module: str, options: CompileOptions) -> tuple:
    registry = backends()
    found = []
    for source in find_kernels(KernelModule(module, path), registry, path.parent):
        impl = registry[source.kind].impl
        kernel = impl.analyze(source, options)
        with source_lines():
            entries = impl.entries(kernel, options)
        for entry in entries:
            found.append((entry.symbol, LoweredEntry(source.kind, kernel, entry, str(path))))
    return tuple(found)


def host_params(kernel: AnalyzedKernel) -> list[dict]:
    """``kernel``'s parameters as the emulator takes them: an array of records carries the record's
    size as ``record_size`` (the element size of its bounds)."""
    records = kernel.records
    return [dict(p, record_size=records[p["dtype"]]["size"]) if p["dtype"] in records else p
            for p in kernel.params]


@lru_cache(maxsize=256)
def _host_kernel(path: Path, module: str, options: CompileOptions, symbol: str) -> HostKernel:
    lowered = dict(_module_entries(path, module, options)).get(symbol)
    if lowered is None:
        raise EmulationError(f"module `{module}` has no kernel entry `{symbol}` (for the targets {options.targets})",
                             code="BT0805", help="a TMA entry (`__tma`) exists only in a build for sm_90a")
    return HostKernel(host_ir(lowered.entry.llvm_ir, symbol), lowered.kernel.source.name, host_params(lowered.kernel),
                      per_tile=lowered.kind == "tile", source_file=lowered.display_file)


def host_kernel(path: Path, module: str, symbol: str, options: CompileOptions | None = None) -> HostKernel:
    """The entry ``symbol`` of module ``module`` (source ``path``) compiled for the host (cached)."""
    return _host_kernel(Path(path).resolve(), module, options or CompileOptions(), symbol)
