"""The SIMT backend's stages, assembled behind the ``BackendImpl`` contract."""

from __future__ import annotations

import ast
import pprint

from buildtile import __version__
from buildtile.backend import AnalyzedKernel, Backend, BackendImpl, CompileEntry, CompileOptions, KernelSource
from buildtile.backends.common.constants import module_constants
from buildtile.backends.common.contract import parse_contract
from buildtile.diagnostics import Diagnostic, Span
from buildtile.errors import CompileError
from buildtile.interop.abi import mangle
from buildtile.toolchain.ptx import llvm_to_ptx
from buildtile.backends.simt import aligned, frontend, intrinsics, ir, lower, ownership
from buildtile.backends.simt.records import is_record, layout_record, module_records
from buildtile.backends.simt.types import Scalar, param_facts, param_kind_name


def params_record(kernel_ir) -> list[dict]:
    """Manifest parameter records (name, kind, dtype, rank, role)."""
    out = []
    for p in kernel_ir.params:
        kind = param_kind_name(p.ty)
        dtype = p.ty.name if isinstance(p.ty, Scalar) else p.ty.elem.name
        rank = 0 if isinstance(p.ty, Scalar) else p.ty.rank
        role = {"read": "in", "disjoint": "out", "atomic": "inout"}.get(getattr(p.ty, "access", "read"))
        out.append({"name": p.name, "kind": kind, "dtype": dtype, "rank": rank, "role": role})
    return out


class SimtBackend(BackendImpl):
    """source -> typed IR -> checked IR -> LLVM IR; one entry per kernel."""

    def analyze(self, source: KernelSource, options: CompileOptions) -> AnalyzedKernel:
        kernel_ir, diags = frontend.build_typed_ir(source)
        param_types = {}
        records, _ = module_records(source.module_ast, source.namespace, source.display_file, source.lines)
        for a in source.node.args.args:
            ty, _ = frontend.parse_param_type(a.annotation, source.namespace, records)
            if ty is not None:
                param_types[a.arg] = param_facts(ty)
        contract, contract_diags = parse_contract(
            source.decorator, param_types, module_constants(source.module_ast),
            source.display_file, source.lines,
        )
        diags = list(contract_diags) + list(diags)
        if kernel_ir is not None:
            diags += ownership.check(kernel_ir, source)
            contract["index_dims"] = kernel_ir.index_dims
            if contract["block"] is None and kernel_ir.index_dims:
                pass  # no contract: launchable only through unsafe_launch
            elif contract["block"] is not None and kernel_ir.index_dims:
                _check_block_dims(contract["block"], kernel_ir.index_dims, source, diags)
            diags += _check_grid_sync(kernel_ir, contract, source)
            contract["coarsen"] = COARSEN_FACTOR if can_coarsen(kernel_ir, contract) else 1
            if any(t.dynamic for t in kernel_ir.shared.values()) and not contract["dynamic_shared"]:
                diags.append(Diagnostic(
                    "BT0600", "the kernel uses `simt.dynamic_shared_array` but its launch contract gives it no bytes",
                    Span.of(source.decorator, source.display_file, source.lines),
                    help="declare the bytes each launch provides at least: `@simt.kernel(..., dynamic_shared=4096)`"))
        if diags:
            raise CompileError(sorted(diags, key=lambda d: (d.span.line if d.span else 0, d.span.col if d.span else 0)))
        return AnalyzedKernel(
            source=source, symbol=mangle(source.module, source.name),
            params=params_record(kernel_ir), contract=contract, ir=kernel_ir,
            records={p.ty.elem.name: layout_record(p.ty.elem, source.module) for p in kernel_ir.params
                     if not isinstance(p.ty, Scalar) and is_record(p.ty.elem)},
            bounds_sites=[record for _, record in bounds_sites(kernel_ir, source)] if options.checks == "debug"
            else None,
        )

    def entries(self, kernel: AnalyzedKernel, options: CompileOptions) -> list[CompileEntry]:
        plain = CompileEntry(kernel.symbol, self.llvm_ir(kernel, options))
        return [plain, *aligned_entries(kernel, plain, options)]

    def typed_ir(self, kernel: AnalyzedKernel, entry: CompileEntry) -> str:
        return pprint.pformat(kernel.ir, width=110)

    def llvm_ir(self, kernel: AnalyzedKernel, options: CompileOptions) -> str:
        """The kernel's LLVM IR; debug builds number each checked read as ``bounds_sites`` does."""
        sites = None
        if options.checks == "debug":
            sites = {load: k for k, (load, _) in enumerate(bounds_sites(kernel.ir, kernel.source))}
        return lower.lower_to_llvm(kernel.ir, kernel.params, kernel.symbol, kernel.contract, sites)

    def to_ptx(self, kernel: AnalyzedKernel, target: str, options: CompileOptions) -> str:
        """The kernel's PTX for one target, as the build makes it (for tests and benchmarks)."""
        return llvm_to_ptx(self.llvm_ir(kernel, options), target, options.opt_level)


def aligned_entries(kernel: AnalyzedKernel, plain: CompileEntry, options: CompileOptions) -> list[CompileEntry]:
    """The kernel's aligned entry (see :mod:`.aligned`), when its PTX differs from ``plain``'s."""
    arrays = [p["name"] for p in kernel.params if p["kind"] != "scalar"]
    if not arrays or options.opt_level == 0:
        return []
    ir_text = aligned.aligned_llvm_ir(plain.llvm_ir, kernel.symbol, arrays)
    if not aligned.ptx_differs(plain.llvm_ir, ir_text, kernel.symbol, options.opt_level):
        return []
    return [CompileEntry(aligned.aligned_symbol(kernel.symbol), ir_text, label="aligned",
                         pointer_align=aligned.POINTER_ALIGN)]


#: logical blocks per physical block for kernels that qualify (see ``can_coarsen``): four
#: independent copies of a body keep about four times the memory requests in flight
COARSEN_FACTOR = 4


def can_coarsen(kernel_ir, contract: dict) -> bool:
    """True when the body sees nothing of the block but ``index_1d()``, so one physical
    thread may run several logical threads one after another with identical results."""
    block = contract.get("block")
    if block is None or block[1] != 1 or block[2] != 1 or kernel_ir.index_dims != 1 or kernel_ir.shared:
        return False
    bodies = [kernel_ir.body] + [fn.body for fn in kernel_ir.functions.values()]
    for body in bodies:
        for stmt in ir.walk_stmts(body):
            if isinstance(stmt, (ir.Unsafe, ir.SharedDecl)):
                return False
        for expr in ir.walk_exprs(body):
            if isinstance(expr, ir.Intrinsic) and expr.name not in intrinsics.MATH_FUNCTIONS \
                    and expr.name not in intrinsics.PURE_INTRINSICS:
                return False   # thread geometry, lanes, warps, barriers, shuffles, votes
            if isinstance(expr, ir.ThreadIndex) and expr.dims != 1:
                return False
    return True


def bounds_sites(kernel_ir, source: KernelSource) -> list[tuple]:
    """Every read of a parameter, numbered in source order, for debug bounds reports."""
    params = {p.name for p in kernel_ir.params}
    sites = []
    for expr in ir.walk_exprs(kernel_ir.body):
        if isinstance(expr, ir.Load) and expr.param in params:
            node = expr.src
            sites.append((expr, {"param": expr.param, "file": source.display_file,
                                 "line": getattr(node, "lineno", 0), "col": getattr(node, "col_offset", 0) + 1,
                                 "text": ast.unparse(node) if node is not None else ""}))
    return sites


def _check_grid_sync(kernel_ir, contract: dict, source: KernelSource) -> list[Diagnostic]:
    """``simt.grid_sync()`` waits for every block of the grid: only a cooperative launch
    (every block resident at once) gets past it, so only such a contract may use it."""
    if contract.get("cooperative"):
        return []
    return [Diagnostic(
        "BT0600", "`simt.grid_sync()` needs a cooperative launch, and the kernel's contract does not ask for one",
        Span.of(expr.src, source.display_file, source.lines),
        help="declare `@simt.kernel(block=..., cooperative=True)`: the grid is then launched so that "
             "every block is resident at once, and `prepare()` refuses a grid that cannot be")
        for expr in ir.walk_exprs(kernel_ir.body) if isinstance(expr, ir.Intrinsic) and expr.name == "grid_sync"]


def _check_block_dims(block: list[int], dims: int, source: KernelSource, diags: list[Diagnostic]) -> None:
    # index_1d() is unique per thread only if the block (and grid) vary along x alone
    used = max((k + 1 for k, n in enumerate(block) if n > 1), default=1)
    if used > dims:
        diags.append(Diagnostic(
            "BT0600", f"block {tuple(block[:used])} has {used} dimensions but the kernel's thread index is "
                      f"{dims}-D (`index_{dims}d()`, or its spelled-out form)",
            Span.of(source.decorator, source.display_file, source.lines),
            help=f"use index_{used}d(), or a {dims}-D block",
        ))


SIMT_BACKEND = Backend(kind="simt", decorator_module="buildtile.simt", impl=SimtBackend(), version=__version__)
