"""Each stage's text of a kernel, for ``buildtile build --emit`` and ``buildtile inspect --stage``.

A build with ``--emit typed-ir,llvm,ptx`` writes, under its build folder::

    stages/<module>.<kernel>[.<entry label>]/<stage>[.<target>].txt

one folder per compiled entry (a tile kernel has one per specialization),
one file per stage, and per target for the stages that differ by target.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from buildtile.backend import STAGES, AnalyzedKernel, BackendImpl, CompileEntry, Stage
from buildtile.errors import ConfigError

STAGES_DIR = "stages"
STAGE_NAMES = tuple(s.name for s in STAGES)


def parse_stages(names: Iterable[str], where: str = "--emit") -> tuple[Stage, ...]:
    """The stages named (``typed-ir``, ``llvm``, ``ptx``), each once, in pipeline order."""
    wanted = {n.strip() for n in names if n.strip()}
    unknown = sorted(wanted - set(STAGE_NAMES))
    if unknown:
        raise ConfigError(f"{where}: unknown stage{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(f'`{n}`' for n in unknown)}", help=f"stages: {', '.join(STAGE_NAMES)}")
    return tuple(s for s in STAGES if s.name in wanted)


def entry_name(kernel: AnalyzedKernel, entry: CompileEntry) -> str:
    """``example_kernels.tiles.add.t1024``; a kernel's only entry: ``example_kernels.ops.vecadd``."""
    name = f"{kernel.source.module}.{kernel.source.name}"
    return f"{name}.{entry.label}" if entry.label else name


def stage_file(build_dir: Path, kernel: AnalyzedKernel, entry: CompileEntry, stage: Stage,
               target: str | None) -> Path:
    leaf = f"{stage.name}.{target}.txt" if stage.per_target else f"{stage.name}.txt"
    return Path(build_dir) / STAGES_DIR / entry_name(kernel, entry) / leaf


def stage_text(impl: BackendImpl, kernel: AnalyzedKernel, entry: CompileEntry, stage: Stage,
               ptx: Callable[[], str]) -> str | None:
    """One stage's text of one entry; ``ptx()`` gives the entry's PTX for the target at hand.
    None where the backend has no such stage (an entry without LLVM IR, a backend without typed IR)."""
    if stage.name == "typed-ir":
        return impl.typed_ir(kernel, entry)
    if stage.name == "llvm":
        return entry.llvm_ir
    return ptx()
