"""Stage 3: checked SIMT IR -> LLVM IR (text), with llvmlite's IR builder.

Parameters follow kernel ABI v1 (``buildtile.interop.abi``). Array
pointers are ``noalias`` and loads from read-only parameters are
``!invariant.load`` -- sound because the host refuses a launch where an
output overlaps any other argument (BT0502) -- which lets LLVM use the
non-coherent read path (``ld.global.nc``).
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as lir

from buildtile.backends.simt import ir
import struct

from buildtile.backends.simt.types import BF16, BOOL, F16, F32, VOID, Scalar, SliceT, TensorT, WitnessT, value_type

TRIPLE = "nvptx64-nvidia-cuda"
DATALAYOUT = "e-p6:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"

GLOBAL_PTR = lir.PointerType(addrspace=1)
I1, I8, I32T, I64T = lir.IntType(1), lir.IntType(8), lir.IntType(32), lir.IntType(64)


def llvm_type(ty: Scalar) -> lir.Type:
    """The register type of a value. f16 and bf16 values live in f32 registers and are
    rounded to their own precision after every operation (``round_half``)."""
    if ty == BOOL:
        return I1
    if ty.is_int:
        return lir.IntType(ty.bits)
    return lir.DoubleType() if ty.bits == 64 else lir.FloatType()


def abi_type(ty: Scalar) -> lir.Type:
    """How a scalar is stored and crosses the kernel ABI: bool as one byte, bf16 as its 16 bits."""
    if ty == BOOL:
        return I8
    if ty == F16:
        return lir.HalfType()
    if ty == BF16:
        return lir.IntType(16)
    return llvm_type(ty)


def from_memory(b: lir.IRBuilder, value: lir.Value, ty: Scalar) -> lir.Value:
    """A stored value (``abi_type``) as a register value (``llvm_type``)."""
    if ty == BOOL:
        return b.icmp_unsigned("!=", value, I8(0))
    if ty == F16:
        return b.fpext(value, lir.FloatType())
    if ty == BF16:   # bf16 is the high half of an f32
        return b.bitcast(b.shl(b.zext(value, I32T), I32T(16)), lir.FloatType())
    return value


def to_memory(b: lir.IRBuilder, value: lir.Value, ty: Scalar) -> lir.Value:
    """A register value as stored (``abi_type``), rounding to nearest even."""
    if ty == BOOL:
        return b.zext(value, I8)
    if ty == F16:
        return b.fptrunc(value, lir.HalfType())
    if ty == BF16:
        bits = b.bitcast(value, I32T)
        lsb = b.and_(b.lshr(bits, I32T(16)), I32T(1))
        rounded = b.lshr(b.add(bits, b.add(I32T(0x7FFF), lsb)), I32T(16))
        is_nan = b.fcmp_unordered("uno", value, value)
        return b.trunc(b.select(is_nan, I32T(0x7FC0), rounded), lir.IntType(16))
    return value


def round_half(b: lir.IRBuilder, value: lir.Value, ty: Scalar) -> lir.Value:
    """Round an f32 register value to f16/bf16 precision (no-op for other types)."""
    if ty in (F16, BF16):
        return from_memory(b, to_memory(b, value, ty), ty)
    return value


@dataclass
class _ArrayParam:
    data: lir.Value
    shape: list[lir.Value]
    strides: list[lir.Value]   # in elements; a slice has stride 1
    elem: Scalar


_SREG = {"thread_idx": "tid", "block_idx": "ctaid", "block_dim": "ntid", "grid_dim": "nctaid"}

#: math functions with an LLVM intrinsic; the rest call libdevice (``__nv_<name>[f]``)
_LLVM_MATH = {"sqrt": "llvm.sqrt", "fabs": "llvm.fabs", "fma": "llvm.fma", "min": "llvm.minnum",
              "max": "llvm.maxnum", "floor": "llvm.floor", "ceil": "llvm.ceil", "trunc": "llvm.trunc",
              "copysign": "llvm.copysign"}
#: simt.shfl_<mode> -> PTX shfl mode (xor is PTX's butterfly)
_SHFL_MODE = {"down": "down", "xor": "bfly", "idx": "idx"}
#: our names whose libdevice names differ (Python's round() rounds half to even, as rint)
_LIBDEVICE_NAME = {"round": "rint"}


#: the module global through which debug builds report an out-of-range read: the host
#: stores there the device address of a zeroed record {u32 flag, u32 site, i64 index,
#: i64 extent, u32 axis, u32 pad}; null (the default) turns reporting off
BOUNDS_GLOBAL = "__buildtile_bounds"


def lower_to_llvm(kernel: ir.KernelIR, symbol: str, contract: dict,
                  bounds_sites: dict | None = None) -> str:
    """LLVM IR text of one kernel, named ``symbol``, with its launch contract.

    With ``bounds_sites`` (a debug build: ``Load`` node -> site number) every read
    listed there is bounds-checked; an out-of-range read yields 0 and is reported.
    """
    module = lir.Module(name=symbol)
    module.triple = TRIPLE
    module.data_layout = DATALAYOUT
    # device functions: internal and always inlined, declared first so that calls resolve in any order
    device_fns = {}
    for name, fn_ir in kernel.functions.items():
        ret = lir.VoidType() if fn_ir.ret == VOID else llvm_type(fn_ir.ret)
        llvm_fn = lir.Function(module, lir.FunctionType(ret, [llvm_type(p.ty) for p in fn_ir.params]), f"{symbol}.{name}")
        llvm_fn.linkage = "internal"
        llvm_fn.attributes.add("alwaysinline")
        device_fns[name] = llvm_fn
    for name, fn_ir in kernel.functions.items():
        _Lowering(fn_ir, symbol, contract, module, device_fns).run_device(device_fns[name])
    lowering = _Lowering(kernel, symbol, contract, module, device_fns)
    lowering.bounds_sites = bounds_sites or {}
    return lowering.run()


def _bounds_reporter(module: lir.Module) -> lir.Function:
    """``void report(i32 site, i64 index, i64 extent, i32 axis)``: first report wins."""
    existing = module.globals.get("buildtile.report_oob")
    if existing is not None:
        return existing
    slot = lir.GlobalVariable(module, I64T, BOUNDS_GLOBAL, addrspace=1)
    slot.initializer = I64T(0)
    slot.align = 8
    fn = lir.Function(module, lir.FunctionType(lir.VoidType(), [I32T, I64T, I64T, I32T]), "buildtile.report_oob")
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("cold")
    site, index, extent, axis = fn.args
    b = lir.IRBuilder(fn.append_basic_block("entry"))
    record_addr = b.load(b.inttoptr(b.ptrtoint(slot, I64T), lir.PointerType(addrspace=1)), typ=I64T)
    done = fn.append_basic_block("done")
    claim = fn.append_basic_block("claim")
    b.cbranch(b.icmp_unsigned("==", record_addr, I64T(0)), done, claim)
    b.position_at_end(claim)
    generic = lir.PointerType()

    def field(offset: int) -> lir.Value:
        return b.inttoptr(b.add(record_addr, I64T(offset)), generic)

    won = b.extract_value(b.cmpxchg(field(0), I32T(0), I32T(1), "monotonic", "monotonic"), 1)
    write = fn.append_basic_block("write")
    b.cbranch(won, write, done)
    b.position_at_end(write)
    b.store(site, field(4))
    b.store(index, field(8))
    b.store(extent, field(16))
    b.store(axis, field(24))
    b.fence("seq_cst")
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    return fn


class _Lowering:
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
        self.params: dict[str, object] = {}
        self.slots: dict[str, lir.Value] = {}
        self.loops: list[tuple[lir.Block, lir.Block]] = []   # (continue target, break target)
        self.kernel_param_types = {p.name: p.ty for p in kernel.params}

    # ------------------------------------------------------------ structure
    def _open_body(self, fn: lir.Function) -> None:
        self.fn = fn
        entry = fn.append_basic_block("entry")
        body = fn.append_basic_block("body")
        # every stack slot lives in the entry block (so mem2reg promotes it), before its branch
        self.alloca_builder = lir.IRBuilder(entry)
        self.alloca_builder.position_before(self.alloca_builder.branch(body))
        self.b = lir.IRBuilder(body)
        self.exit = fn.append_basic_block("exit")

    def _alloc_locals(self) -> None:
        for name, ty in self.kernel.locals.items():
            slot_ty = I64T if isinstance(ty, WitnessT) else llvm_type(ty)
            self.slots[name] = self.alloca_builder.alloca(slot_ty, name=name)

    def _close_body(self) -> None:
        if not self.b.block.is_terminated:
            self.b.branch(self.exit)

    def run_device(self, fn: lir.Function) -> None:
        self._open_body(fn)
        exit_b = lir.IRBuilder(self.exit)
        if self.kernel.ret == VOID:
            exit_b.ret_void()
        else:
            # a path that falls off the end is rejected by the typer; the zero only keeps LLVM's verifier happy
            self.ret_slot = self.alloca_builder.alloca(llvm_type(self.kernel.ret), name="result")
            self.alloca_builder.store(llvm_type(self.kernel.ret)(0), self.ret_slot)
            exit_b.ret(exit_b.load(self.ret_slot))
        for p, arg in zip(self.kernel.params, fn.args):
            arg.name = p.name
            self.params[p.name] = arg
        self._alloc_locals()
        self.stmts(self.kernel.body)
        self._close_body()

    def run(self) -> str:
        arg_types, arg_names = [], []
        for p in self.kernel.params:
            if isinstance(p.ty, Scalar):
                arg_types.append(abi_type(p.ty)); arg_names.append(p.name)
            else:
                rank = p.ty.rank if isinstance(p.ty, TensorT) else 1
                arg_types.append(GLOBAL_PTR); arg_names.append(f"{p.name}.data")
                arg_types += [I64T] * (rank if isinstance(p.ty, TensorT) else 1)
                arg_names += [f"{p.name}.shape{k}" for k in range(rank)] if isinstance(p.ty, TensorT) else [f"{p.name}.len"]
                if isinstance(p.ty, TensorT):
                    arg_types += [I64T] * rank
                    arg_names += [f"{p.name}.stride{k}" for k in range(rank)]
        coarsen = self.contract.get("coarsen", 1)
        if coarsen > 1:   # ABI: a coarsened kernel takes the logical grid's x extent last
            arg_types.append(I64T)
            arg_names.append("logical_blocks")
        fn = lir.Function(self.module, lir.FunctionType(lir.VoidType(), arg_types), self.symbol)
        fn.calling_convention = "ptx_kernel"
        for arg, name in zip(fn.args, arg_names):
            arg.name = name
        self._open_body(fn)
        lir.IRBuilder(self.exit).ret_void()

        args = iter(fn.args)
        for p in self.kernel.params:
            if isinstance(p.ty, Scalar):
                raw = next(args)
                self.params[p.name] = from_memory(self.b, raw, p.ty)
                continue
            data = next(args)
            if p.ty.access != "atomic":
                # NVPTX takes a noalias pointer it sees only read from for ld.global.nc, which it
                # cannot select for an atomic load (LLVM aborts); other threads write it anyway
                data.add_attribute("noalias")
            if isinstance(p.ty, SliceT):
                self.params[p.name] = _ArrayParam(data, [next(args)], [I64T(1)], p.ty.elem)
            else:
                shape = [next(args) for _ in range(p.ty.rank)]
                strides = [next(args) for _ in range(p.ty.rank)]
                self.params[p.name] = _ArrayParam(data, shape, strides, p.ty.elem)
            # extents are never negative (the hosts check): lets LLVM merge `i < len(c)` with the
            # unsigned range test of a disjoint store
            assume = self.intrinsic("llvm.assume", lir.VoidType(), [I1])
            for extent in self.params[p.name].shape:
                self.alloca_builder.call(assume, [self.alloca_builder.icmp_signed(">=", extent, I64T(0))])
        for name, ty in self.kernel.shared.items():
            buf = lir.GlobalVariable(self.module, lir.ArrayType(abi_type(ty.elem), ty.size),
                                     f"{self.symbol}__shared_{name}", addrspace=3)   # a PTX identifier
            buf.align = 16
            if ty.dynamic:   # `extern .shared`: the bytes the launch gives as dynamic shared memory
                buf.linkage = "external"
            else:
                buf.linkage = "internal"
                buf.initializer = lir.Constant(buf.value_type, lir.Undefined)
            # seen through an untyped shared-space pointer, a shared array indexes like a slice
            # (llvmlite types globals with typed pointers; the int round trip folds away in LLVM)
            as_int = self.alloca_builder.ptrtoint(buf, I64T)
            data = self.alloca_builder.inttoptr(as_int, lir.PointerType(addrspace=3), name=name)
            length = I64T(ty.size)
            if ty.dynamic:
                size = self.alloca_builder.call(
                    lir.InlineAsm(lir.FunctionType(I32T, []), "mov.u32 $0, %dynamic_smem_size;", "=r"), [])
                length = self.alloca_builder.udiv(self.alloca_builder.zext(size, I64T), I64T(max(1, ty.elem.bits // 8)))
            self.params[name] = _ArrayParam(data, [length], [I64T(1)], ty.elem)
        self._alloc_locals()
        if coarsen > 1:
            self._coarsened_body(coarsen, fn.args[-1])
        else:
            self.stmts(self.kernel.body)
        self._close_body()
        self._annotate()
        return str(self.module)

    def _coarsened_body(self, factor: int, logical_blocks: lir.Value) -> None:
        """Run the body for ``factor`` logical blocks per physical block.

        Logical block ``ctaid.x * factor + k`` runs as copy ``k``; a kernel qualifies only
        when its body depends on nothing but ``index_1d()`` and its parameters, so the
        copies are independent and ptxas can overlap their memory traffic. Full physical
        blocks run the copies unguarded; the last one checks each logical block.
        """
        first = self.b.mul(self.b.zext(self.sreg("ctaid.x"), I64T), I64T(factor), flags=["nuw"])
        full = self.b.icmp_unsigned("<=", self.b.add(first, I64T(factor)), logical_blocks)
        full_bb = self.fn.append_basic_block("coarse.full")
        tail_bb = self.fn.append_basic_block("coarse.tail")
        self.b.cbranch(full, full_bb, tail_bb, )
        for start, guarded in ((full_bb, False), (tail_bb, True)):
            self.b.position_at_end(start)
            for k in range(factor):
                after = self.fn.append_basic_block(f"coarse.next{k}")
                block_index = self.b.add(first, I64T(k))
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

    def _annotate(self) -> None:
        md = []
        block = self.contract.get("block")
        if block:
            for axis, n in zip("xyz", block):
                md.append(self.module.add_metadata([self.fn, lir.MetaDataString(self.module, f"reqntid{axis}"), I32T(n)]))
        if self.contract.get("min_blocks"):
            md.append(self.module.add_metadata([self.fn, lir.MetaDataString(self.module, "minctasm"),
                                                I32T(self.contract["min_blocks"])]))
        if md:
            annotations = self.module.add_named_metadata("nvvm.annotations")
            for node in md:
                annotations.add(node)

    def _fresh_block_after_terminator(self) -> None:
        if self.b.block.is_terminated:
            self.b.position_at_end(self.fn.append_basic_block("dead"))

    # ------------------------------------------------------------ statements
    def stmts(self, stmts: list[ir.Stmt]) -> None:
        for stmt in stmts:
            self._fresh_block_after_terminator()
            getattr(self, "stmt_" + type(stmt).__name__)(stmt)

    def stmt_Assign(self, s: ir.Assign) -> None:
        self.b.store(self.expr(s.value), self.slots[s.name])

    def stmt_ExprStmt(self, s: ir.ExprStmt) -> None:  # noqa: D102
        self.expr(s.value)

    def stmt_Store(self, s: ir.Store) -> None:
        arr = self.params[s.param]
        indices = [self.index(i) for i in s.indices]
        # an out-of-range disjoint write is a handled branch: the store is skipped
        in_range = None
        for idx, extent in zip(indices, arr.shape):
            ok = self.b.icmp_unsigned("<", idx, extent)
            in_range = ok if in_range is None else self.b.and_(in_range, ok)
        value = self.expr(s.value)
        with self.b.if_then(in_range, likely=True):
            self.b.store(to_memory(self.b, value, arr.elem), self.address(arr, indices), align=max(1, arr.elem.bits // 8))

    def stmt_If(self, s: ir.If) -> None:
        cond = self.expr(s.cond)
        then_bb = self.fn.append_basic_block("if.then")
        else_bb = self.fn.append_basic_block("if.else") if s.orelse else None
        merge = self.fn.append_basic_block("if.end")
        self.b.cbranch(cond, then_bb, else_bb or merge)
        for bb, body in ((then_bb, s.then), (else_bb, s.orelse)):
            if bb is None:
                continue
            self.b.position_at_end(bb)
            self.stmts(body)
            if not self.b.block.is_terminated:
                self.b.branch(merge)
        self.b.position_at_end(merge)

    def stmt_While(self, s: ir.While) -> None:
        head = self.fn.append_basic_block("while.cond")
        body = self.fn.append_basic_block("while.body")
        done = self.fn.append_basic_block("while.end")
        self.b.branch(head)
        self.b.position_at_end(head)
        self.b.cbranch(self.expr(s.cond), body, done)
        self.b.position_at_end(body)
        self.loops.append((head, done))
        self.stmts(s.body)
        self.loops.pop()
        if not self.b.block.is_terminated:
            self.b.branch(head)
        self.b.position_at_end(done)

    def stmt_ForRange(self, s: ir.ForRange) -> None:
        ty = self.kernel.locals[s.var]
        signed = ty.kind == "int"
        # range() evaluates its arguments once; a hidden counter drives the loop so that
        # assigning the loop variable in the body does not change the iteration (Python semantics)
        counter = self.alloca_builder.alloca(llvm_type(ty), name=f"{s.var}.iter")
        self.b.store(self.expr(s.start), counter)
        stop, step = self.expr(s.stop), self.expr(s.step)
        head = self.fn.append_basic_block("for.cond")
        body = self.fn.append_basic_block("for.body")
        latch = self.fn.append_basic_block("for.next")
        done = self.fn.append_basic_block("for.end")
        self.b.branch(head)
        self.b.position_at_end(head)
        cur = self.b.load(counter)
        cmp = self.b.icmp_signed if signed else self.b.icmp_unsigned
        if s.step_sign > 0:
            going = cmp("<", cur, stop)
        elif s.step_sign < 0:
            going = cmp(">", cur, stop)
        else:
            positive = self.b.icmp_signed(">", step, step.type(0))
            going = self.b.select(positive, cmp("<", cur, stop), cmp(">", cur, stop))
        self.b.cbranch(going, body, done)
        self.b.position_at_end(body)
        self.b.store(cur, self.slots[s.var])
        self.loops.append((latch, done))
        self.stmts(s.body)
        self.loops.pop()
        if not self.b.block.is_terminated:
            self.b.branch(latch)
        self.b.position_at_end(latch)
        self.b.store(self.b.add(self.b.load(counter), step), counter)
        self.b.branch(head)
        self.b.position_at_end(done)

    def stmt_Break(self, s) -> None:
        self.b.branch(self.loops[-1][1])

    def stmt_Continue(self, s) -> None:
        self.b.branch(self.loops[-1][0])

    def stmt_Return(self, s: ir.Return) -> None:
        if s.value is not None:
            self.b.store(self.expr(s.value), self.ret_slot)
        self.b.branch(self.exit_target or self.exit)

    def expr_Call(self, e: ir.Call) -> lir.Value:
        return self.b.call(self.device_fns[e.func], [self.expr(a) for a in e.args])

    def stmt_SharedDecl(self, s: ir.SharedDecl) -> None:
        pass  # the buffer is a module-level variable in shared memory, made in run()

    def stmt_Unsafe(self, s: ir.Unsafe) -> None:
        self.stmts(s.body)

    # ------------------------------------------------------------ memory
    def index(self, e: ir.Expr) -> lir.Value:
        """An index as i64 (sign- or zero-extended by its type)."""
        v = self.expr(e)
        ty = value_type(e.ty)
        if v.type.width < 64:
            return self.b.zext(v, I64T) if ty.kind == "uint" else self.b.sext(v, I64T)
        return v

    def address(self, arr: _ArrayParam, indices: list[lir.Value]) -> lir.Value:
        offset = None
        for idx, stride in zip(indices, arr.strides):
            term = idx if isinstance(stride, lir.Constant) and stride.constant == 1 else self.b.mul(idx, stride)
            offset = term if offset is None else self.b.add(offset, term)
        mem_ty = abi_type(arr.elem)
        return self.b.gep(arr.data, [offset], source_etype=mem_ty)

    # ------------------------------------------------------------ expressions
    def expr(self, e: ir.Expr) -> lir.Value:
        return getattr(self, "expr_" + type(e).__name__)(e)

    def expr_Const(self, e: ir.Const) -> lir.Value:
        if e.ty == F16:
            return lir.FloatType()(struct.unpack("<e", struct.pack("<e", e.value))[0])
        if e.ty == BF16:
            return lir.FloatType()(_bf16_round(float(e.value)))
        return llvm_type(e.ty)(int(e.value) if not e.ty.is_float else float(e.value))

    def expr_Var(self, e: ir.Var) -> lir.Value:
        return self.b.load(self.slots[e.name])

    def expr_ParamRef(self, e: ir.ParamRef) -> lir.Value:
        return self.params[e.name]

    def expr_Len(self, e: ir.Len) -> lir.Value:
        return self.params[e.param].shape[0]

    def expr_Shape(self, e: ir.Shape) -> lir.Value:
        return self.params[e.param].shape[e.axis]

    def expr_Load(self, e: ir.Load) -> lir.Value:
        arr = self.params[e.param]
        indices = [self.index(i) for i in e.indices]
        site = self.bounds_sites.get(e)
        if site is None:
            return self._load(e, arr, indices)
        # debug build: an out-of-range read is reported (first one wins) and reads as 0
        oks = [self.b.icmp_unsigned("<", idx, extent) for idx, extent in zip(indices, arr.shape)]
        in_range = oks[0]
        for ok in oks[1:]:
            in_range = self.b.and_(in_range, ok)
        load_bb = self.fn.append_basic_block("load.ok")
        fail_bb = self.fn.append_basic_block("load.oob")
        done = self.fn.append_basic_block("load.end")
        self.b.cbranch(in_range, load_bb, fail_bb, )
        self.b.position_at_end(fail_bb)
        bad_axis, bad_index, bad_extent = I32T(0), indices[0], arr.shape[0]
        for axis in reversed(range(len(indices))):   # the first failing axis wins
            bad_axis = self.b.select(oks[axis], bad_axis, I32T(axis))
            bad_index = self.b.select(oks[axis], bad_index, indices[axis])
            bad_extent = self.b.select(oks[axis], bad_extent, arr.shape[axis])
        self.b.call(_bounds_reporter(self.module), [I32T(site), bad_index, bad_extent, bad_axis])
        self.b.branch(done)
        self.b.position_at_end(load_bb)
        value = self._load(e, arr, indices)
        ok_end = self.b.block
        self.b.branch(done)
        self.b.position_at_end(done)
        phi = self.b.phi(value.type)
        phi.add_incoming(value, ok_end)
        phi.add_incoming(value.type(0.0 if isinstance(value.type, (lir.FloatType, lir.DoubleType)) else 0), fail_bb)
        return phi

    def _load(self, e: ir.Load, arr: _ArrayParam, indices: list[lir.Value]) -> lir.Value:
        ptr = self.address(arr, indices)
        align = max(1, arr.elem.bits // 8)
        if getattr(self.kernel_param_types.get(e.param), "access", None) == "atomic":
            # other threads change an AtomicSlice during the launch: read it atomically (relaxed),
            # so a loop that waits on it reloads it every time
            return from_memory(self.b, self.b.load_atomic(ptr, "monotonic", align, typ=abi_type(arr.elem)), arr.elem)
        value = self.b.load(ptr, typ=abi_type(arr.elem), align=align)
        if getattr(self.kernel_param_types.get(e.param), "access", None) == "read":
            # nothing writes a read-only parameter during the launch: lets LLVM use ld.global.nc
            value.set_metadata("invariant.load", self.module.add_metadata([]))
        return from_memory(self.b, value, arr.elem)

    def expr_ThreadIndex(self, e: ir.ThreadIndex) -> lir.Value:
        # index_Nd() axis k: axis dims-1 runs along x (fastest), axis 0 along the slowest dimension
        axis = e.ty.axis if isinstance(e.ty, WitnessT) else 0
        dim = "xyz"[e.dims - 1 - axis]
        ctaid = self.logical_block if self.logical_block is not None else self.b.zext(self.sreg(f"ctaid.{dim}"), I64T)
        ntid = self.b.zext(self.sreg(f"ntid.{dim}"), I64T)
        tid = self.b.zext(self.sreg(f"tid.{dim}"), I64T)
        return self.b.add(self.b.mul(ctaid, ntid, flags=["nuw"]), tid, flags=["nuw"])

    def intrinsic(self, name: str, ret: lir.Type, args: list[lir.Type]) -> lir.Function:
        """An LLVM intrinsic, declared once per module; overloaded ones get their
        result type's suffix (``llvm.fma.f32``), void ones keep their name (``llvm.assume``)."""
        full = name if isinstance(ret, lir.VoidType) else f"{name}.{_type_suffix(ret)}"
        fn = self.module.globals.get(full)
        if fn is None:
            fn = lir.Function(self.module, lir.FunctionType(ret, args), full)
        return fn

    def sreg(self, name: str) -> lir.Value:
        block = self.contract.get("block")
        if name.startswith("ntid.") and block:   # the launch contract fixes the block shape (.reqntid)
            return I32T(block["xyz".index(name[-1])])
        fn_name = "llvm.nvvm.read.ptx.sreg." + name
        fn = self.module.globals.get(fn_name)
        if fn is None:
            fn = lir.Function(self.module, lir.FunctionType(I32T, []), fn_name)
        return self.b.call(fn, [])

    def expr_Intrinsic(self, e: ir.Intrinsic) -> lir.Value:
        name = e.name
        if "." in name:
            group, axis = name.split(".")
            return self.b.zext(self.sreg(f"{_SREG[group]}.{axis}"), I64T)
        if name == "lane_id":
            return self.b.zext(self.sreg("laneid"), I64T)
        if name == "warp_id":
            return self.b.lshr(self._linear_tid(), I64T(5))
        if name == "sync_threads":
            asm = lir.InlineAsm(lir.FunctionType(lir.VoidType(), []), "bar.sync 0;", "~{memory}", side_effect=True)
            return self.b.call(asm, [])
        args = [self.expr(a) for a in e.args]
        if name.startswith("shfl_"):
            return self.shuffle(name[5:], e.ty, args[0], args[1])
        if name.startswith("vote_"):
            return self.vote(name[5:], args[0])
        return round_half(self.b, self.math(name, e.ty, args), e.ty)

    def shuffle(self, mode: str, ty: Scalar, value: lir.Value, lane: lir.Value) -> lir.Value:
        # all 32 lanes take part; clamp 0x1f as CUDA's __shfl_*_sync with width 32
        text = f"shfl.sync.{_SHFL_MODE[mode]}.b32 $0, $1, $2, 0x1f, 0xffffffff;"
        if ty.bits == 32:
            as_int = value if ty.is_int else self.b.bitcast(value, I32T)
            out = self.b.call(lir.InlineAsm(lir.FunctionType(I32T, [I32T, I32T]), text, "=r,r,r", side_effect=True), [as_int, lane])
            return out if ty.is_int else self.b.bitcast(out, llvm_type(ty))
        # 64-bit values move as two 32-bit halves
        as_int = value if ty.is_int else self.b.bitcast(value, I64T)
        lo = self.b.trunc(as_int, I32T)
        hi = self.b.trunc(self.b.lshr(as_int, I64T(32)), I32T)
        asm = lir.InlineAsm(lir.FunctionType(I32T, [I32T, I32T]), text, "=r,r,r", side_effect=True)
        lo, hi = self.b.call(asm, [lo, lane]), self.b.call(asm, [hi, lane])
        joined = self.b.or_(self.b.zext(lo, I64T), self.b.shl(self.b.zext(hi, I64T), I64T(32)))
        return joined if ty.is_int else self.b.bitcast(joined, llvm_type(ty))

    def vote(self, mode: str, pred: lir.Value) -> lir.Value:
        if mode == "ballot":
            text = "{ .reg .pred p; setp.ne.u32 p, $1, 0; vote.sync.ballot.b32 $0, p, 0xffffffff; }"
        else:
            text = f"{{ .reg .pred p, q; setp.ne.u32 p, $1, 0; vote.sync.{mode}.pred q, p, 0xffffffff; selp.u32 $0, 1, 0, q; }}"
        out = self.b.call(lir.InlineAsm(lir.FunctionType(I32T, [I32T]), text, "=r,r", side_effect=True),
                          [self.b.zext(pred, I32T)])
        return out if mode == "ballot" else self.b.icmp_unsigned("!=", out, I32T(0))

    def expr_AtomicOp(self, e: ir.AtomicOp) -> lir.Value:
        # any index is allowed, but one past the end is skipped (the result is then 0), never a fault
        arr = self.params[e.param]
        idx = self.index(e.index)
        args = [self.expr(a) for a in e.args]
        elem_ty = llvm_type(arr.elem)
        start = self.b.block
        in_range = self.b.icmp_unsigned("<", idx, arr.shape[0])
        do = self.fn.append_basic_block("atomic")
        done = self.fn.append_basic_block("atomic.end")
        self.b.cbranch(in_range, do, done)
        self.b.position_at_end(do)
        ptr = self.address(arr, [idx])
        if e.op == "cas":
            pair = self.b.cmpxchg(ptr, args[0], args[1], "monotonic", "monotonic")
            old = self.b.extract_value(pair, 0)
        else:
            if arr.elem.is_float:
                op = {"add": "fadd", "exchange": "xchg"}[e.op]
            else:
                signed = arr.elem.kind == "int"
                op = {"add": "add", "exchange": "xchg", "min": "min" if signed else "umin",
                      "max": "max" if signed else "umax"}[e.op]
            old = self.b.atomic_rmw(op, ptr, args[0], "monotonic")
        self.b.branch(done)
        self.b.position_at_end(done)
        phi = self.b.phi(elem_ty)
        phi.add_incoming(old, do)
        phi.add_incoming(elem_ty(0.0 if arr.elem.is_float else 0), start)
        return phi

    def _linear_tid(self) -> lir.Value:
        x, y, z = (self.b.zext(self.sreg(f"tid.{d}"), I64T) for d in "xyz")
        nx, ny = (self.b.zext(self.sreg(f"ntid.{d}"), I64T) for d in "xy")
        return self.b.add(x, self.b.mul(nx, self.b.add(y, self.b.mul(ny, z))))

    def math(self, name: str, ty: Scalar, args: list[lir.Value]) -> lir.Value:
        t = llvm_type(ty)
        if ty.is_int:
            if name == "fabs":
                return self.b.call(self.intrinsic("llvm.abs", t, [t, I1]), [args[0], I1(0)])
            op = {("min", "int"): "llvm.smin", ("max", "int"): "llvm.smax",
                  ("min", "uint"): "llvm.umin", ("max", "uint"): "llvm.umax"}[(name, ty.kind)]
            return self.b.call(self.intrinsic(op, t, [t] * len(args)), args)
        if name in _LLVM_MATH:
            return self.b.call(self.intrinsic(_LLVM_MATH[name], t, [t] * len(args)), args)
        base = _LIBDEVICE_NAME.get(name, name)
        fn_name = f"__nv_{base}f" if ty.bits <= 32 else f"__nv_{base}"
        fn = self.module.globals.get(fn_name)
        if fn is None:
            fn = lir.Function(self.module, lir.FunctionType(t, [t] * len(args)), fn_name)
        return self.b.call(fn, args)

    def expr_BinOp(self, e: ir.BinOp) -> lir.Value:
        lhs, rhs = self.expr(e.lhs), self.expr(e.rhs)
        ty = value_type(e.ty)
        b = self.b
        if ty.is_float and e.op in ("//", "%"):
            # Python: a // b = floor(a / b); a % b = a - b * floor(a / b), with the sign of b
            floor = self.intrinsic("llvm.floor", lhs.type, [lhs.type])
            q = b.call(floor, [b.fdiv(lhs, rhs)])
            out = q if e.op == "//" else b.fsub(lhs, b.fmul(rhs, q))
            return round_half(b, out, ty)
        if ty.is_float:
            op = {"+": b.fadd, "-": b.fsub, "*": b.fmul, "/": b.fdiv}[e.op]
            out = op(lhs, rhs)
            out.flags.append("contract")   # allow fused multiply-add, as nvcc does by default
            return round_half(b, out, ty)
        signed = ty.kind == "int"
        if e.op == "//":
            return self._floordiv(lhs, rhs) if signed else b.udiv(lhs, rhs)
        if e.op == "%":
            return self._pymod(lhs, rhs) if signed else b.urem(lhs, rhs)
        simple = {"+": b.add, "-": b.sub, "*": b.mul, "&": b.and_, "|": b.or_, "^": b.xor, "<<": b.shl,
                  ">>": b.ashr if signed else b.lshr}
        return simple[e.op](lhs, rhs)

    def _floordiv(self, a: lir.Value, n: lir.Value) -> lir.Value:
        # Python rounds toward -inf: adjust C's truncated quotient when signs differ and it is inexact
        q, r = self.b.sdiv(a, n), self.b.srem(a, n)
        zero = a.type(0)
        inexact = self.b.icmp_signed("!=", r, zero)
        signs_differ = self.b.icmp_signed("<", self.b.xor(r, n), zero)
        adjust = self.b.and_(inexact, signs_differ)
        return self.b.sub(q, self.b.zext(adjust, a.type))

    def _pymod(self, a: lir.Value, n: lir.Value) -> lir.Value:
        # Python's remainder takes the divisor's sign
        r = self.b.srem(a, n)
        zero = a.type(0)
        inexact = self.b.icmp_signed("!=", r, zero)
        signs_differ = self.b.icmp_signed("<", self.b.xor(r, n), zero)
        return self.b.select(self.b.and_(inexact, signs_differ), self.b.add(r, n), r)

    def expr_UnaryOp(self, e: ir.UnaryOp) -> lir.Value:
        v = self.expr(e.operand)
        if e.op == "not":
            return self.b.not_(v)
        if e.op == "~":
            return self.b.not_(v)
        return self.b.fneg(v) if value_type(e.ty).is_float else self.b.neg(v)

    def expr_Compare(self, e: ir.Compare) -> lir.Value:
        lhs, rhs = self.expr(e.lhs), self.expr(e.rhs)
        ty = value_type(e.lhs.ty)
        if ty.is_float:
            # ordered comparisons are false with NaN; != is true with NaN (IEEE, as Python)
            return self.b.fcmp_unordered("!=", lhs, rhs) if e.op == "!=" else self.b.fcmp_ordered(e.op, lhs, rhs)
        if ty.kind == "uint" or ty == BOOL:
            return self.b.icmp_unsigned(e.op, lhs, rhs)
        return self.b.icmp_signed(e.op, lhs, rhs)

    def expr_BoolOp(self, e: ir.BoolOp) -> lir.Value:
        # short-circuit: `i < n and a[i] > 0` must not read a[i] when i >= n
        done = self.fn.append_basic_block(f"{e.op}.end")
        incoming = []
        for k, value in enumerate(e.values):
            v = self.expr(value)
            if k == len(e.values) - 1:
                incoming.append((v, self.b.block))
                self.b.branch(done)
                break
            nxt = self.fn.append_basic_block(f"{e.op}.rhs")
            incoming.append((v, self.b.block))
            if e.op == "and":
                self.b.cbranch(v, nxt, done)
            else:
                self.b.cbranch(v, done, nxt)
            self.b.position_at_end(nxt)
        self.b.position_at_end(done)
        phi = self.b.phi(I1)
        for v, bb in incoming:
            phi.add_incoming(v, bb)
        return phi

    def expr_Select(self, e: ir.Select) -> lir.Value:
        cond = self.expr(e.cond)
        then_bb = self.fn.append_basic_block("sel.then")
        else_bb = self.fn.append_basic_block("sel.else")
        done = self.fn.append_basic_block("sel.end")
        self.b.cbranch(cond, then_bb, else_bb)
        self.b.position_at_end(then_bb)
        tv, tb = self.expr(e.then), None
        tb = self.b.block
        self.b.branch(done)
        self.b.position_at_end(else_bb)
        ev = self.expr(e.orelse)
        eb = self.b.block
        self.b.branch(done)
        self.b.position_at_end(done)
        phi = self.b.phi(tv.type)
        phi.add_incoming(tv, tb)
        phi.add_incoming(ev, eb)
        return phi

    def expr_Cast(self, e: ir.Cast) -> lir.Value:
        v = self.expr(e.value)
        src, dst = value_type(e.value.ty), e.ty
        return convert(self.b, v, src, dst)


def _type_suffix(t: lir.Type) -> str:
    if isinstance(t, lir.IntType):
        return f"i{t.width}"
    return {lir.FloatType(): "f32", lir.DoubleType(): "f64", lir.HalfType(): "f16"}[t]


def convert(b: lir.IRBuilder, v: lir.Value, src: Scalar, dst: Scalar) -> lir.Value:
    """A numeric conversion with C semantics (truncation toward zero for float->int)."""
    if src == dst:
        return v
    if src in (F16, BF16):      # already an f32 register value
        src = F32
    if dst in (F16, BF16):
        return round_half(b, convert(b, v, src, F32), dst)
    t = llvm_type(dst)
    if dst == BOOL:
        return b.fcmp_unordered("!=", v, v.type(0.0)) if src.is_float else b.icmp_unsigned("!=", v, v.type(0))
    if src == BOOL:
        return b.uitofp(v, t) if dst.is_float else b.zext(v, t)
    if src.is_float and dst.is_float:
        return b.fpext(v, t) if dst.bits > src.bits else b.fptrunc(v, t)
    if src.is_float:
        return b.fptosi(v, t) if dst.kind == "int" else b.fptoui(v, t)
    if dst.is_float:
        return b.sitofp(v, t) if src.kind == "int" else b.uitofp(v, t)
    if dst.bits > src.bits:
        return b.sext(v, t) if src.kind == "int" else b.zext(v, t)
    if dst.bits < src.bits:
        return b.trunc(v, t)
    return v


def _bf16_round(x: float) -> float:
    """``x`` rounded to bf16 (nearest even), as the f32 value it stands for."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
