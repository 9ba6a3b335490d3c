"""SIMT intrinsics as LLVM IR: thread geometry, math, warp shuffles and votes, atomics."""

from __future__ import annotations

import llvmlite.ir as lir

from buildtile.backends.common.llvm import (
    I1,
    I32,
    I64,
    asm,
    barrier,
    declare,
    intrinsic,
    libdevice,
    reg_type,
    round_half,
    sreg,
    type_suffix,
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
_SHFL_MODE = {"down": "down", "xor": "bfly", "idx": "idx"}
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
        if "." in name:
            group, axis = name.split(".")
            return self.b.zext(self.sreg(f"{_SREG[group]}.{axis}"), I64)
        if name == "lane_id":
            return self.b.zext(self.sreg("laneid"), I64)
        if name == "warp_id":
            return self.b.lshr(self._linear_tid(), I64(5))
        if name == "sync_threads":
            return barrier(self.b)
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
            as_int = value if ty.is_int else self.b.bitcast(value, I32)
            out = asm(self.b, I32, text, "=r,r,r", [as_int, lane], side_effect=True)
            return out if ty.is_int else self.b.bitcast(out, reg_type(ty))
        # 64-bit values move as two 32-bit halves
        as_int = value if ty.is_int else self.b.bitcast(value, I64)
        lo = self.b.trunc(as_int, I32)
        hi = self.b.trunc(self.b.lshr(as_int, I64(32)), I32)
        lo = asm(self.b, I32, text, "=r,r,r", [lo, lane], side_effect=True)
        hi = asm(self.b, I32, text, "=r,r,r", [hi, lane], side_effect=True)
        joined = self.b.or_(self.b.zext(lo, I64), self.b.shl(self.b.zext(hi, I64), I64(32)))
        return joined if ty.is_int else self.b.bitcast(joined, reg_type(ty))

    def vote(self, mode: str, pred: lir.Value) -> lir.Value:
        if mode == "ballot":
            text = "{ .reg .pred p; setp.ne.u32 p, $1, 0; vote.sync.ballot.b32 $0, p, 0xffffffff; }"
        else:
            text = f"{{ .reg .pred p, q; setp.ne.u32 p, $1, 0; vote.sync.{mode}.pred q, p, 0xffffffff; selp.u32 $0, 1, 0, q; }}"
        out = asm(self.b, I32, text, "=r,r", [self.b.zext(pred, I32)], side_effect=True)
        return out if mode == "ballot" else self.b.icmp_unsigned("!=", out, I32(0))

    def expr_AtomicOp(self, e: ir.AtomicOp) -> lir.Value:
        # any index is allowed, but one past the end is skipped (the result is then 0), never a fault
        arr = self.params[e.param]
        idx = self.index(e.index)
        args = [self.expr(a) for a in e.args]
        elem_ty = reg_type(arr.elem)
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
