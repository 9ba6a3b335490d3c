"""SIMT intrinsics as LLVM IR: thread geometry, math, warp shuffles and votes, atomics."""

from __future__ import annotations

import llvmlite.ir as lir

from buildtile.backends.common.llvm import (
    CONST_PTR,
    F32T,
    I1,
    I32,
    I64,
    asm,
    barrier,
    box_muller,
    declare,
    from_memory,
    intrinsic,
    libdevice,
    mem_type,
    memory_const,
    mulhi,
    philox4x32,
    reg_type,
    round_half,
    sreg,
    type_suffix,
    uniform_f32,
    zero_of,
)
from buildtile.backends.simt import ir
from buildtile.backends.simt.types import Scalar, WitnessT

_SREG = {"thread_idx": "tid", "block_idx": "ctaid", "block_dim": "ntid", "grid_dim": "nctaid"}

#: math functions with an LLVM intrinsic; the rest call libdevice (``__nv_<name>[f]``)
_LLVM_MATH = {"sqrt": "llvm.sqrt", "fabs": "llvm.fabs", "fma": "llvm.fma", "min": "llvm.minnum",
              "max": "llvm.maxnum", "floor": "llvm.floor", "ceil": "llvm.ceil", "trunc": "llvm.trunc",
              "copysign": "llvm.copysign"}
#: simt.shfl_<mode> -> PTX shfl mode (xor is PTX's butterfly)
_SHFL_MODE = {"down": "down", "up": "up", "xor": "bfly", "idx": "idx"}
#: our names whose libdevice names differ (Python's round() rounds half to even, as rint)
_LIBDEVICE_NAME = {"round": "rint"}


class IntrinsicLowering:
    """The intrinsic expressions of the SIMT lowering."""

    def sreg(self, name: str) -> lir.Value:
        block = self.contract.get("block")
        if name.startswith("ntid.") and block:   # the launch contract fixes the block shape (.reqntid)
            return I32(block["xyz".index(name[-1])])
        return sreg(self.b, name)

    def expr_ThreadIndex(self, e: ir.ThreadIndex) -> lir.Value:
        # index_Nd() axis k: axis dims-1 runs along x (fastest), axis 0 along the slowest dimension
        axis = e.ty.axis if isinstance(e.ty, WitnessT) else 0
        dim = "xyz"[e.dims - 1 - axis]
        ctaid = self.logical_block if self.logical_block is not None else self.b.zext(self.sreg(f"ctaid.{dim}"), I64)
        ntid = self.b.zext(self.sreg(f"ntid.{dim}"), I64)
        tid = self.b.zext(self.sreg(f"tid.{dim}"), I64)
        return self.b.add(self.b.mul(ctaid, ntid, flags=["nuw"]), tid, flags=["nuw"])

    def expr_Intrinsic(self, e: ir.Intrinsic) -> lir.Value:
        name = e.name
        if name.startswith("complex."):
            return self.complex_op(e, name[8:])
        if "." in name:
            group, axis = name.split(".")
            return self.b.zext(self.sreg(f"{_SREG[group]}.{axis}"), I64)
        if name == "lane_id":
            return self.b.zext(self.sreg("laneid"), I64)
        if name == "warp_id":
            return self.b.lshr(self._linear_tid(), I64(5))
        if name == "sync_threads":
            return barrier(self.b)
        if name == "grid_sync":
            return self.grid_sync()
        if name.startswith("shfl_"):
            value, lane = self.expr(e.args[0]), self.expr(e.args[1])
            mask = None if len(e.args) < 4 else e.args[3].value if isinstance(e.args[3], ir.Const) else self.expr(e.args[3])
            return self.shuffle(name[5:], e.ty, value, lane, e.args[2].value, mask)
        args = [self.expr(a) for a in e.args]
        if name == "syncwarp":
            return self.syncwarp(args[0] if args else None)
        if name == "mulhi":
            return mulhi(self.b, args[0], args[1], signed=e.ty.kind == "int")
        if name in ("philox", "uniform", "normal"):
            return self.random(name, args)
        if name.startswith("vote_"):
            return self.vote(name[5:], args[0])
        return round_half(self.b, self.math(name, e.ty, args), e.ty)

    def shuffle(self, mode: str, ty: Scalar, value: lir.Value, lane: lir.Value, width: int = 32,
                mask: int | lir.Value | None = None) -> lir.Value:
        """``shfl.sync`` of ``value`` among the lanes of ``mask`` (all 32 when None; a constant
        mask is an immediate, a run-time one a register)."""
        # the c operand as CUDA's __shfl_*_sync(mask, v, x, width) builds it: the segment mask
        # ((32 - width) << 8) and the clamp lane (0x1f, or 0 for shfl.up, which clamps at the bottom)
        c = ((32 - width) << 8) | (0 if mode == "up" else 0x1f)
        if mask is None:
            mask = 0xFFFFFFFF
        runtime_mask = isinstance(mask, lir.Value)
        member = "$3" if runtime_mask else f"0x{mask:x}"
        text = f"shfl.sync.{_SHFL_MODE[mode]}.b32 $0, $1, $2, 0x{c:x}, {member};"
        constraints = "=r,r,r,r" if runtime_mask else "=r,r,r"
        extra = [mask] if runtime_mask else []
        if ty.bits == 32:
            as_int = value if ty.is_int else self.b.bitcast(value, I32)
            out = asm(self.b, I32, text, constraints, [as_int, lane] + extra, side_effect=True)
            return out if ty.is_int else self.b.bitcast(out, reg_type(ty))
        # 64-bit values move as two 32-bit halves
        as_int = value if ty.is_int else self.b.bitcast(value, I64)
        lo = self.b.trunc(as_int, I32)
        hi = self.b.trunc(self.b.lshr(as_int, I64(32)), I32)
        lo = asm(self.b, I32, text, constraints, [lo, lane] + extra, side_effect=True)
        hi = asm(self.b, I32, text, constraints, [hi, lane] + extra, side_effect=True)
        joined = self.b.or_(self.b.zext(lo, I64), self.b.shl(self.b.zext(hi, I64), I64(32)))
        return joined if ty.is_int else self.b.bitcast(joined, reg_type(ty))

    def syncwarp(self, mask: lir.Value | None) -> lir.Value:
        """``bar.warp.sync``: the lanes of ``mask`` (all 32 by default) meet; orders their memory accesses."""
        if mask is None or isinstance(mask, lir.Constant):
            text = f"bar.warp.sync 0x{0xFFFFFFFF if mask is None else mask.constant & 0xFFFFFFFF:x};"
            return asm(self.b, lir.VoidType(), text, "~{memory}", [], side_effect=True)
        return asm(self.b, lir.VoidType(), "bar.warp.sync $0;", "r,~{memory}", [mask], side_effect=True)

    def grid_sync(self) -> lir.Value:
        """Every thread of the grid arrives: the barrier of a cooperative launch, as CUDA's
        grid groups make it. The driver gives such a launch a workspace (its address in
        ``%envreg2``/``%envreg1``, low/high) whose second word counts arrivals; thread 0 of
        each block adds 1 to it, block 0 adds ``2**31 - (blocks - 1)``, so the top bit flips
        when the last block arrives, and each waits for that flip."""
        b = self.b
        barrier(b)
        tid = b.or_(b.or_(self.sreg("tid.x"), self.sreg("tid.y")), self.sreg("tid.z"))
        arrive = self.fn.append_basic_block("grid_sync.arrive")
        wait = self.fn.append_basic_block("grid_sync.wait")
        done = self.fn.append_basic_block("grid_sync.done")
        b.cbranch(b.icmp_unsigned("==", tid, I32(0)), arrive, done)
        b.position_at_end(arrive)
        workspace = asm(b, I64, "mov.b64 $0, {%envreg2, %envreg1};", "=l", [], side_effect=True)
        counter = b.add(workspace, I64(4))
        blocks = b.mul(b.mul(self.sreg("nctaid.x"), self.sreg("nctaid.y")), self.sreg("nctaid.z"))
        ctaid = b.or_(b.or_(self.sreg("ctaid.x"), self.sreg("ctaid.y")), self.sreg("ctaid.z"))
        first = b.sub(I32(0x80000000), b.sub(blocks, I32(1)))
        step = b.select(b.icmp_unsigned("==", ctaid, I32(0)), first, I32(1))
        old = asm(b, I32, "atom.add.release.gpu.u32 $0, [$1], $2;", "=r,l,r,~{memory}", [counter, step],
                  side_effect=True)
        b.branch(wait)
        b.position_at_end(wait)
        now = asm(b, I32, "ld.acquire.gpu.u32 $0, [$1];", "=r,l,~{memory}", [counter], side_effect=True)
        flipped = b.icmp_unsigned("!=", b.and_(b.xor(old, now), I32(0x80000000)), I32(0))
        b.cbranch(flipped, done, wait)
        b.position_at_end(done)
        return barrier(b)

    def random(self, name: str, args: list[lir.Value]) -> lir.Value:
        """``buildtile.random``: one Philox-4x32-10 block of counter (offset, counter) under key seed."""
        seed, offset = args[0], args[1]
        counter = args[2] if name == "philox" else I64(0)
        halves = [self.b.trunc(v, I32) if k == 0 else self.b.trunc(self.b.lshr(v, I64(32)), I32)
                  for v in (offset, counter) for k in (0, 1)]
        key = [self.b.trunc(seed, I32), self.b.trunc(self.b.lshr(seed, I64(32)), I32)]
        words = philox4x32(self.b, halves, key)
        if name == "philox":
            return words[args[3].constant]
        if name == "uniform":
            return uniform_f32(self.b, words[0])
        log, cos = (libdevice(self.module, f, F32T, 1) for f in ("log", "cospi"))
        sqrt = intrinsic(self.module, "llvm.sqrt", F32T, 1)
        return box_muller(self.b, words[0], words[1], log, sqrt, cos)

    def expr_ConstArrayLoad(self, e: ir.ConstArrayLoad) -> lir.Value:
        # one constant-memory array per tuple and element type; an index out of range reads 0
        name = f"{self.symbol}__const_{e.name}_{e.ty}"
        table = self.module.globals.get(name)
        elem_t = mem_type(e.ty)
        if table is None:
            table = lir.GlobalVariable(self.module, lir.ArrayType(elem_t, len(e.values)), name, addrspace=4)
            table.global_constant = True
            table.linkage = "internal"
            table.align = max(1, e.ty.bits // 8)
            table.initializer = lir.Constant(table.value_type, [memory_const(e.ty, v) for v in e.values])
        idx = self.index(e.index)
        in_range = self.b.icmp_unsigned("<", idx, I64(len(e.values)))
        safe = self.b.select(in_range, idx, I64(0))
        data = self.b.inttoptr(self.b.ptrtoint(table, I64), CONST_PTR)
        value = self.b.load(self.b.gep(data, [safe], source_etype=elem_t), typ=elem_t, align=table.align)
        return self.b.select(in_range, from_memory(self.b, value, e.ty), zero_of(reg_type(e.ty)))

    def vote(self, mode: str, pred: lir.Value) -> lir.Value:
        if mode == "ballot":
            text = "{ .reg .pred p; setp.ne.u32 p, $1, 0; vote.sync.ballot.b32 $0, p, 0xffffffff; }"
        else:
            text = f"{{ .reg .pred p, q; setp.ne.u32 p, $1, 0; vote.sync.{mode}.pred q, p, 0xffffffff; selp.u32 $0, 1, 0, q; }}"
        out = asm(self.b, I32, text, "=r,r", [self.b.zext(pred, I32)], side_effect=True)
        return out if mode == "ballot" else self.b.icmp_unsigned("!=", out, I32(0))

    def expr_AtomicOp(self, e: ir.AtomicOp) -> lir.Value:
        # any index is allowed, but one past the end is skipped (the result is then 0), never a fault;
        # on a shared array the pointer is in shared space, so these become atom.shared
        arr = self.params[e.param]
        indices = [self.index(i) for i in e.indices]
        args = [self.expr(a) for a in e.args]
        elem_ty = reg_type(arr.elem)
        start = self.b.block
        in_range = None
        for idx, extent in zip(indices, arr.shape):
            ok = self.b.icmp_unsigned("<", idx, extent)
            in_range = ok if in_range is None else self.b.and_(in_range, ok)
        do = self.fn.append_basic_block("atomic")
        done = self.fn.append_basic_block("atomic.end")
        self.b.cbranch(in_range, do, done)
        self.b.position_at_end(do)
        ptr = self.address(arr, indices)
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
        phi.add_incoming(zero_of(elem_ty), start)
        return phi

    def _linear_tid(self) -> lir.Value:
        x, y, z = (self.b.zext(self.sreg(f"tid.{d}"), I64) for d in "xyz")
        nx, ny = (self.b.zext(self.sreg(f"ntid.{d}"), I64) for d in "xy")
        return self.b.add(x, self.b.mul(nx, self.b.add(y, self.b.mul(ny, z))))

    def math(self, name: str, ty: Scalar, args: list[lir.Value]) -> lir.Value:
        t = reg_type(ty)
        if ty.is_int:
            if name == "fabs":
                return self.b.call(declare(self.module, f"llvm.abs.{type_suffix(t)}", t, [t, I1]), [args[0], I1(0)])
            op = {("min", "int"): "llvm.smin", ("max", "int"): "llvm.smax",
                  ("min", "uint"): "llvm.umin", ("max", "uint"): "llvm.umax"}[(name, ty.kind)]
            return self.b.call(intrinsic(self.module, op, t, len(args)), args)
        if name in _LLVM_MATH:
            return self.b.call(intrinsic(self.module, _LLVM_MATH[name], t, len(args)), args)
        return self.b.call(libdevice(self.module, _LIBDEVICE_NAME.get(name, name), t, len(args)), args)
