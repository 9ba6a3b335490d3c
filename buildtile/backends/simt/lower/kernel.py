"""A kernel's and its device functions' LLVM functions: the lowering's parts assembled,
the kernel entry, shared arrays, and the copies of a coarsened kernel."""

from __future__ import annotations

import llvmlite.ir as lir

from buildtile.backends.common.entry import ArrayArg, FunctionBody, kernel_entry, open_body
from buildtile.backends.common.llvm import (
    I1,
    GLOBAL_PTR,
    I64,
    SHARED_PTR,
    VOID,
    declare,
    dynamic_smem_size,
    mem_type,
    new_module,
    reg_type,
    zero_of,
)
from buildtile.backends.simt import ir, types
from buildtile.backends.simt.lower.bounds import BoundsChecks
from buildtile.backends.simt.lower.complex import ComplexLowering
from buildtile.backends.simt.lower.expr import ExpressionLowering
from buildtile.backends.simt.lower.intrinsic import IntrinsicLowering
from buildtile.backends.simt.lower.stmt import StatementLowering
from buildtile.backends.simt.types import WitnessT
from buildtile.interop.abi import trailing_params


def lower_to_llvm(kernel: ir.KernelIR, params: list[dict], symbol: str, contract: dict,
                  bounds_sites: dict | None = None) -> str:
    """LLVM IR text of one kernel, named ``symbol``, with its manifest parameter records
    ``params`` and its launch contract.

    With ``bounds_sites`` (a debug build: ``Load`` node -> site number) every read
    listed there is bounds-checked; an out-of-range read yields 0 and is reported.
    """
    module = new_module(symbol)
    # device functions: internal and always inlined, declared first so that calls resolve in any order
    device_fns = {}
    for name, fn_ir in kernel.functions.items():
        ret = VOID if fn_ir.ret == types.VOID else slot_type(fn_ir.ret)
        args = [t for p in fn_ir.params for t in arg_types(p.ty)]
        llvm_fn = lir.Function(module, lir.FunctionType(ret, args), f"{symbol}.{name}")
        llvm_fn.linkage = "internal"
        llvm_fn.attributes.add("alwaysinline")
        device_fns[name] = llvm_fn
    for name, fn_ir in kernel.functions.items():
        _Lowering(fn_ir, symbol, contract, module, device_fns).run_device(device_fns[name])
    lowering = _Lowering(kernel, symbol, contract, module, device_fns)
    lowering.bounds_sites = bounds_sites or {}
    return lowering.run(params)


def slot_type(ty) -> lir.Type:
    """The LLVM type a local or a result of IR type ``ty`` is kept in."""
    if isinstance(ty, WitnessT):
        return I64
    if isinstance(ty, types.TupleT):
        return lir.LiteralStructType([reg_type(t) for t in ty.elems])
    return reg_type(ty)


def arg_types(ty) -> list[lir.Type]:
    """A device function parameter's LLVM arguments: a scalar, or an array's data, extents (and strides)."""
    if isinstance(ty, types.SliceT):
        return [GLOBAL_PTR, I64]
    if isinstance(ty, types.TensorT):
        return [GLOBAL_PTR] + [I64] * (2 * ty.rank)
    if isinstance(ty, types.SharedT):
        return [SHARED_PTR] + [I64] * (2 * ty.rank)
    return [reg_type(ty)]


class _Lowering(StatementLowering, ExpressionLowering, IntrinsicLowering, ComplexLowering, BoundsChecks):
    """One function's lowering; its parts share the state set up here (``b``, ``fn``, ``params`` ...)."""

    def __init__(self, kernel, symbol: str, contract: dict, module: lir.Module,
                 device_fns: dict[str, lir.Function]) -> None:
        self.kernel = kernel          # a KernelIR, or a FunctionIR for run_device
        self.symbol = symbol
        self.contract = contract
        self.module = module
        self.device_fns = device_fns
        self.ret_slot = None
        self.logical_block = None      # in a coarsened kernel: the logical block of the copy being emitted
        self.exit_target = None        # where `return` goes when not to the function's exit
        self.bounds_sites: dict = {}
        self.param_kinds: dict[str, str] = {}   # a kernel's array parameters: manifest kind by name
        self.params: dict[str, object] = {}    # register value or ArrayArg, by name
        self.slots: dict[str, lir.Value] = {}
        self.loops: list[tuple[lir.Block, lir.Block]] = []   # (continue target, break target)

    # ------------------------------------------------------------ structure
    def _open_body(self, body: FunctionBody) -> None:
        self.fn, self.alloca_builder, self.b = body.fn, body.alloca_builder, body.builder
        self.exit = self.fn.append_basic_block("exit")

    def _alloc_locals(self) -> None:
        for name, ty in self.kernel.locals.items():
            self.slots[name] = self.alloca_builder.alloca(slot_type(ty), name=name)

    def _close_body(self) -> None:
        if not self.b.block.is_terminated:
            self.b.branch(self.exit)

    def run_device(self, fn: lir.Function) -> None:
        self._open_body(open_body(fn))
        exit_b = lir.IRBuilder(self.exit)
        if self.kernel.ret == types.VOID:
            exit_b.ret_void()
        elif isinstance(self.kernel.ret, types.TupleT):
            self.ret_slot = self.alloca_builder.alloca(slot_type(self.kernel.ret), name="result")
            self.alloca_builder.store(lir.Constant(slot_type(self.kernel.ret), None), self.ret_slot)
            exit_b.ret(exit_b.load(self.ret_slot))
        else:
            # a path that falls off the end is rejected by the typer; the zero only keeps LLVM's verifier happy
            self.ret_slot = self.alloca_builder.alloca(reg_type(self.kernel.ret), name="result")
            self.alloca_builder.store(zero_of(reg_type(self.kernel.ret)), self.ret_slot)
            exit_b.ret(exit_b.load(self.ret_slot))
        args = iter(fn.args)
        for p in self.kernel.params:
            values = [next(args) for _ in arg_types(p.ty)]
            for k, v in enumerate(values):
                v.name = p.name if k == 0 else f"{p.name}.{k}"
            if isinstance(p.ty, types.SliceT):
                self.params[p.name] = ArrayArg(values[0], [values[1]], [I64(1)], p.ty.elem)
                self.param_kinds[p.name] = types.param_kind_name(p.ty)
            elif isinstance(p.ty, (types.TensorT, types.SharedT)):
                rank = p.ty.rank
                self.params[p.name] = ArrayArg(values[0], values[1:1 + rank], values[1 + rank:], p.ty.elem)
                if isinstance(p.ty, types.TensorT):   # a shared view has no manifest kind, as the kernel's
                    self.param_kinds[p.name] = types.param_kind_name(p.ty)
            else:
                self.params[p.name] = values[0]
        self._alloc_locals()
        self.stmts(self.kernel.body)
        self._close_body()

    def run(self, params: list[dict]) -> str:
        coarsen = self.contract.get("coarsen", 1)
        entry = kernel_entry(self.module, self.symbol, params, trailing=trailing_params(self.contract),
                             reqntid=self.contract.get("block"), min_blocks=self.contract.get("min_blocks"),
                             records={p.ty.elem.name: p.ty.elem for p in self.kernel.params
                                      if isinstance(p.ty, (types.SliceT, types.TensorT)) and p.ty.elem.kind == "record"})
        self._open_body(entry)
        lir.IRBuilder(self.exit).ret_void()
        self.param_kinds = {p["name"]: p["kind"] for p in params if p["kind"] != "scalar"}
        self.params.update(entry.scalars)
        self.params.update(entry.arrays)
        # extents are never negative (the hosts check): lets LLVM merge `i < len(c)` with the
        # unsigned range test of a disjoint store
        assume = declare(self.module, "llvm.assume", VOID, [I1])
        for arr in entry.arrays.values():
            for extent in arr.shape:
                self.alloca_builder.call(assume, [self.alloca_builder.icmp_signed(">=", extent, I64(0))])
        self._shared_arrays()
        self._alloc_locals()
        if coarsen > 1:
            self._coarsened_body(coarsen, entry.trailing["logical_blocks"])
        else:
            self.stmts(self.kernel.body)
        self._close_body()
        return str(self.module)

    def _shared_arrays(self) -> None:
        for name, ty in self.kernel.shared.items():
            buf = lir.GlobalVariable(self.module, lir.ArrayType(mem_type(ty.elem), ty.size),
                                     f"{self.symbol}__shared_{name}", addrspace=3)   # a PTX identifier
            buf.align = 16
            if ty.dynamic:   # `extern .shared`: the bytes the launch gives as dynamic shared memory
                buf.linkage = "external"
            else:
                buf.linkage = "internal"
                buf.initializer = lir.Constant(buf.value_type, lir.Undefined)
            # seen through an untyped shared-space pointer, a shared array indexes like a slice
            # (llvmlite types globals with typed pointers; the int round trip folds away in LLVM)
            as_int = self.alloca_builder.ptrtoint(buf, I64)
            data = self.alloca_builder.inttoptr(as_int, SHARED_PTR, name=name)
            if ty.dynamic:
                size = dynamic_smem_size(self.alloca_builder)
                length = self.alloca_builder.udiv(self.alloca_builder.zext(size, I64), I64(max(1, ty.elem.bits // 8)))
                self.params[name] = ArrayArg(data, [length], [I64(1)], ty.elem)
                continue
            strides = [1]   # row-major: the last axis is contiguous
            for extent in reversed(ty.shape[1:]):
                strides.insert(0, strides[0] * extent)
            self.params[name] = ArrayArg(data, [I64(n) for n in ty.shape], [I64(k) for k in strides], ty.elem)

    def _coarsened_body(self, factor: int, logical_blocks: lir.Value) -> None:
        """Run the body for ``factor`` logical blocks per physical block.

        Logical block ``ctaid.x * factor + k`` runs as copy ``k``; a kernel qualifies only
        when its body depends on nothing but ``index_1d()`` and its parameters, so the
        copies are independent and ptxas can overlap their memory traffic. Full physical
        blocks run the copies unguarded; the last one checks each logical block.
        """
        first = self.b.mul(self.b.zext(self.sreg("ctaid.x"), I64), I64(factor), flags=["nuw"])
        full = self.b.icmp_unsigned("<=", self.b.add(first, I64(factor)), logical_blocks)
        full_bb = self.fn.append_basic_block("coarse.full")
        tail_bb = self.fn.append_basic_block("coarse.tail")
        self.b.cbranch(full, full_bb, tail_bb)
        for start, guarded in ((full_bb, False), (tail_bb, True)):
            self.b.position_at_end(start)
            for k in range(factor):
                after = self.fn.append_basic_block(f"coarse.next{k}")
                block_index = self.b.add(first, I64(k))
                if guarded:
                    body_bb = self.fn.append_basic_block(f"coarse.copy{k}")
                    self.b.cbranch(self.b.icmp_unsigned("<", block_index, logical_blocks), body_bb, after)
                    self.b.position_at_end(body_bb)
                self.logical_block, self.exit_target = block_index, after   # `return` ends this copy only
                self.stmts(self.kernel.body)
                if not self.b.block.is_terminated:
                    self.b.branch(after)
                self.b.position_at_end(after)
            self.b.branch(self.exit)
        self.logical_block, self.exit_target = None, None


__all__ = ["lower_to_llvm"]
