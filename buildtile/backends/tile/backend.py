"""The Tile backend's stages, assembled behind the ``BackendImpl`` contract.

    source --specializations--> typed IR (one per tile shape) --ownership--> checked IR
           --plan--> planned IR (threads, layouts, pipelines) --lower--> LLVM IR --> PTX

Each stage is a plain function over plain data (``frontend.build_typed_ir``,
``ownership.check``, ``plan.make_plan``, ``lower.lower_to_llvm``), so tests
and tools can stop anywhere. ``analyze`` runs every check for every
specialization; lowering to LLVM IR happens on first need and is cached.
Each specialization is one compiled entry; its manifest record (tile shapes,
block, shared bytes) travels with it (see ``buildtile.interop.manifest``).
A project that targets ``sm_90a`` also gets, for each specialization whose K
loop takes the Hopper path (``hopper``), a second entry built for sm_90a
alone: the TMA entry, which the hosts launch instead when the inputs suit
the copy engine (manifest ``tma``).
"""

from __future__ import annotations

import ast
import copy
import pprint
from dataclasses import dataclass, field
from functools import cached_property

from buildtile import __version__
from buildtile.backend import AnalyzedKernel, Backend, BackendImpl, CompileEntry, CompileOptions, KernelSource
from buildtile.backends.tile import frontend, ir, ownership
from buildtile.backends.tile.dtype_vars import bound_source
from buildtile.backends.tile.hopper.select import HOPPER_TARGET
from buildtile.backends.tile.lower import LoweredKernel, lower_to_llvm
from buildtile.backends.tile.plan import Plan, make_plan
from buildtile.backends.tile.specialize import Specialization, parse_decorator
from buildtile.backends.tile.types import Scalar
from buildtile.diagnostics import Diagnostic, Span
from buildtile.errors import CompileError
from buildtile.toolchain.ptx import llvm_to_ptx, target_arch

#: tensor cores with ldmatrix, mma.sync on bf16 and cp.async: Ampere and newer
MMA_MIN_ARCH = 80
#: the suffix of a specialization's TMA entry (a leading ``_`` never reads as part of a name)
TMA_SUFFIX = "__tma"


@dataclass
class TmaVariant:
    """A specialization's TMA entry: its own copy of the checked IR, planned for sm_90a."""

    kernel_ir: ir.KernelIR
    plan: Plan
    symbol: str

    @cached_property
    def lowered(self) -> LoweredKernel:
        return lower_to_llvm(self.kernel_ir, params_record(self.kernel_ir), self.plan, self.symbol)

    def record(self) -> dict:
        """The manifest's ``tma`` record, less ``symbol`` and ``artifacts``."""
        return {"block": [self.plan.threads, 1, 1], "shared_bytes": self.lowered.shared_bytes,
                "maps": self.plan.hopper.maps()}


@dataclass
class TileSpecialization:
    """One specialization of an analyzed kernel: its checked IR and plan, lowered on first use."""

    spec: Specialization
    kernel_ir: ir.KernelIR
    plan: Plan
    param_dtypes: dict[str, str] = field(default_factory=dict)   # generic parameters -> their dtype here
    _lowered: LoweredKernel | None = None

    @property
    def symbol(self) -> str:
        return self.spec.symbol

    @property
    def tile_shapes(self) -> dict[str, list[int]]:
        return {name: list(shape) for name, shape in self.spec.tile_shapes}

    @property
    def lowered(self) -> LoweredKernel:
        if self._lowered is None:
            self._lowered = lower_to_llvm(self.kernel_ir, params_record(self.kernel_ir), self.plan, self.spec.symbol)
        return self._lowered

    @property
    def block(self) -> list[int]:
        return [self.plan.threads, 1, 1]

    @property
    def shared_bytes(self) -> int:
        return self.lowered.shared_bytes

    @property
    def label(self) -> str:
        """``t1024``, ``t64x64``: the specialization's part of its symbol."""
        return self.symbol.rsplit("__", 1)[1]

    @cached_property
    def tma(self) -> TmaVariant | None:
        """The TMA entry, where the Hopper planner takes this specialization's K loop (the IR is
        copied: a plan writes its layouts into the nodes)."""
        kernel_ir = copy.deepcopy(self.kernel_ir)
        plan = make_plan(kernel_ir, HOPPER_TARGET)
        return TmaVariant(kernel_ir, plan, self.symbol + TMA_SUFFIX) if plan.hopper is not None else None

    def record(self) -> dict:
        """The manifest record, less its ``artifacts``."""
        record = {"tile_shapes": self.tile_shapes, "symbol": self.symbol, "block": self.block,
                  "shared_bytes": self.shared_bytes, "schedule": True}
        if self.spec.dtypes:   # a generic kernel: what its dtype variables stand for, and which arrays follow them
            record["dtypes"] = dict(self.spec.dtypes)
            record["param_dtypes"] = dict(self.param_dtypes)
        return record


def generic_params(source: KernelSource, spec: Specialization) -> tuple[dict[str, str], list[Diagnostic]]:
    """The parameters whose annotation names one of ``spec``'s dtype variables, with the dtype it
    binds; a scalar one is refused (a launch picks the specialization from its arrays' dtypes)."""
    bound = dict(spec.dtypes)
    out, diags = {}, []
    for a in source.node.args.args:
        names = [n.id for n in ast.walk(a.annotation) if isinstance(n, ast.Name) and n.id in bound] \
            if a.annotation is not None else []
        if not names:
            continue
        if not isinstance(a.annotation, ast.Subscript):
            diags.append(Diagnostic(
                "BT0308", f"scalar parameter `{a.arg}` cannot have the dtype variable `{names[0]}` as its type",
                Span.of(a.annotation, source.display_file, source.lines),
                help="a launch picks the dtype from its arrays; take the scalar as f32 (or i64) and convert "
                     f"it in the kernel: `{names[0]}({a.arg})`"))
            continue
        out[a.arg] = bound[names[0]]
    return out, diags


def params_record(kernel_ir: ir.KernelIR) -> list[dict]:
    out = []
    for p in kernel_ir.params:
        if isinstance(p.ty, Scalar):
            out.append({"name": p.name, "kind": "scalar", "dtype": p.ty.name, "rank": 0, "role": "in"})
        elif p.ty.atomic:
            out.append({"name": p.name, "kind": "tile_atomic", "dtype": p.ty.elem.name, "rank": p.ty.rank,
                        "role": "inout"})
        else:
            out.append({"name": p.name, "kind": "tile_out" if p.ty.is_out else "tensor", "dtype": p.ty.elem.name,
                        "rank": p.ty.rank, "role": "out" if p.ty.is_out else "in"})
    return out


class TileBackend(BackendImpl):
    """source -> typed IR per specialization -> checked IR -> plan -> LLVM IR; one entry per specialization."""

    def analyze(self, source: KernelSource, options: CompileOptions) -> AnalyzedKernel:
        specs, contract, diags = parse_decorator(source, options)
        per_spec: list[list[Diagnostic]] = []
        compiled: list[TileSpecialization] = []
        for spec in specs:
            bound = bound_source(source, spec.dtypes)
            param_dtypes, found = generic_params(source, spec)
            kernel_ir, typed = frontend.build_typed_ir(bound, spec.shapes)
            found = found + typed
            if kernel_ir is not None:
                found = found + ownership.check(kernel_ir, bound)
            per_spec.append(found)
            if not found and not diags:
                compiled.append(TileSpecialization(spec, kernel_ir, make_plan(kernel_ir), param_dtypes))
        if not specs and not diags:   # no tile.Out parameter: type once to report why
            _, found = frontend.build_typed_ir(source, {})
            per_spec.append(found)
        diags = list(diags) + _merge(per_spec, specs)
        if diags:
            raise CompileError(sorted(diags, key=lambda d: (d.span.line if d.span else 0, d.span.col if d.span else 0)))
        first = compiled[0]
        if any(isinstance(e, ir.Mma) for c in compiled for e in ir.walk_exprs(c.kernel_ir.body)):
            contract["min_compute_capability"] = MMA_MIN_ARCH
        return AnalyzedKernel(source=source, symbol=first.symbol, params=params_record(first.kernel_ir),
                              contract=contract, ir=compiled, grid_param=next(iter(first.kernel_ir.tile_shapes)))

    def entries(self, kernel: AnalyzedKernel, options: CompileOptions) -> list[CompileEntry]:
        out = []
        for s in self.specializations(kernel):
            out.append(CompileEntry(s.symbol, s.lowered.llvm_ir, label=s.label, specialization=s.record()))
            if HOPPER_TARGET in options.targets and s.tma is not None:
                out.append(CompileEntry(s.tma.symbol, s.tma.lowered.llvm_ir, label=s.label + TMA_SUFFIX,
                                        specialization=s.tma.record(), targets=(HOPPER_TARGET,), tma_of=s.symbol))
        return out

    def check_target(self, kernel: AnalyzedKernel, entry: CompileEntry, target: str,
                     options: CompileOptions) -> list[Diagnostic]:
        arch, _ = target_arch(target)
        if arch >= MMA_MIN_ARCH:
            return []
        body = self._specialization(kernel, entry).kernel_ir.body
        mma_site = next((e for e in ir.walk_exprs(body) if isinstance(e, ir.Mma)), None)
        if mma_site is None:
            return []
        src = kernel.source
        return [Diagnostic(
            "BT0600", f"`tile.mma` needs sm_{MMA_MIN_ARCH} or newer, but the project targets {target}",
            Span.of(mma_site.src, src.display_file, src.lines),
            help=f"remove {target} from tool.buildtile.targets, or keep mma kernels in a project for "
                 f"sm_{MMA_MIN_ARCH}+")]

    def typed_ir(self, kernel: AnalyzedKernel, entry: CompileEntry) -> str:
        return pprint.pformat(self._specialization(kernel, entry).kernel_ir, width=110)

    def specializations(self, kernel: AnalyzedKernel) -> list[TileSpecialization]:
        """Every specialization to compile; each has ``symbol``, ``block``, ``shared_bytes``, ``record()``."""
        return list(kernel.ir)

    def llvm_ir(self, kernel: AnalyzedKernel, options: CompileOptions | None = None,
                specialization: TileSpecialization | None = None) -> str:
        """LLVM IR of one specialization (the first by default); the same for every target."""
        return (specialization or kernel.ir[0]).lowered.llvm_ir

    def to_ptx(self, kernel: AnalyzedKernel, target: str, options: CompileOptions,
               specialization: TileSpecialization | None = None) -> str:
        """PTX of one specialization (the first by default) for one target, as the build makes it
        (for tests and tools): a target ``check_target`` refuses is a ``CompileError``."""
        chosen = specialization or kernel.ir[0]
        entry = CompileEntry(chosen.symbol, chosen.lowered.llvm_ir, label=chosen.label)
        refusals = self.check_target(kernel, entry, target, options)
        if refusals:
            raise CompileError(refusals)
        return llvm_to_ptx(chosen.lowered.llvm_ir, target, options.opt_level)

    def _specialization(self, kernel: AnalyzedKernel, entry: CompileEntry) -> TileSpecialization:
        symbol = entry.tma_of or entry.symbol
        return next(s for s in kernel.ir if s.symbol == symbol)


def _merge(per_spec: list[list[Diagnostic]], specs: list[Specialization]) -> list[Diagnostic]:
    """One copy of each diagnostic; one that only some specializations have names them."""
    out, seen = [], {}
    for k, found in enumerate(per_spec):
        for d in found:
            key = (d.code, d.message, d.span)
            seen.setdefault(key, (d, []))[1].append(k)
    for d, where in seen.values():
        if len(specs) > 1 and len(where) < len(specs):
            names = "; ".join(specs[k].describe() for k in where)
            d = Diagnostic(d.code, d.message, d.span, d.label, d.help,
                           d.notes + (f"in the specialization{'s' if len(where) > 1 else ''} {names}",), d.severity)
        out.append(d)
    return out


TILE_BACKEND = Backend(kind="tile", decorator_module="buildtile.tile", impl=TileBackend(), version=__version__)

__all__ = ["TILE_BACKEND", "TMA_SUFFIX", "TileBackend", "TileSpecialization", "TmaVariant", "params_record"]
