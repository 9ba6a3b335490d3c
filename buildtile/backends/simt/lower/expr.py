"""SIMT expressions as LLVM IR: values, arithmetic with Python's semantics, reads of arrays."""

from __future__ import annotations

import llvmlite.ir as lir

from buildtile.backends.common.entry import ArrayArg
from buildtile.backends.common.llvm import (
    I1,
    I32,
    I64,
    compare,
    convert,
    record_struct,
    floor_div,
    floor_mod,
    from_memory,
    intrinsic,
    mem_type,
    rounded_const,
    round_half,
)
from buildtile.backends.simt import ir
from buildtile.backends.simt.types import SharedT, TensorT, element_align, value_type

#: the parameter kinds nothing writes during a launch
_READ_ONLY_KINDS = ("slice", "tensor")


class ExpressionLowering:
    """The value expressions of the SIMT lowering."""

    def expr(self, e: ir.Expr) -> lir.Value:
        return getattr(self, "expr_" + type(e).__name__)(e)

    def expr_Const(self, e: ir.Const) -> lir.Value:
        return rounded_const(e.ty, e.value)

    def expr_Var(self, e: ir.Var) -> lir.Value:
        return self.b.load(self.slots[e.name])

    def expr_ParamRef(self, e: ir.ParamRef) -> lir.Value:
        return self.params[e.name]

    def expr_Len(self, e: ir.Len) -> lir.Value:
        return self.params[e.param].shape[0]

    def expr_Shape(self, e: ir.Shape) -> lir.Value:
        return self.params[e.param].shape[e.axis]

    def expr_Call(self, e: ir.Call) -> lir.Value:
        args = []
        for a in e.args:
            value = self.expr(a)
            if isinstance(value, ArrayArg):   # an array: its data, extents and (a tensor's) strides
                args += [value.data, *value.shape, *(value.strides if isinstance(a.ty, (TensorT, SharedT)) else [])]
            else:
                args.append(value)
        return self.b.call(self.device_fns[e.func], args)

    def expr_TupleItem(self, e: ir.TupleItem) -> lir.Value:
        return self.b.extract_value(self.b.load(self.slots[e.tuple]), e.index)

    # ------------------------------------------------------------ memory
    def index(self, e: ir.Expr) -> lir.Value:
        """An index as i64 (sign- or zero-extended by its type)."""
        v = self.expr(e)
        ty = value_type(e.ty)
        if v.type.width < 64:
            return self.b.zext(v, I64) if ty.kind == "uint" else self.b.sext(v, I64)
        return v

    def address(self, arr: ArrayArg, indices: list[lir.Value]) -> lir.Value:
        offset = None
        for idx, stride in zip(indices, arr.strides):
            term = idx if isinstance(stride, lir.Constant) and stride.constant == 1 else self.b.mul(idx, stride)
            offset = term if offset is None else self.b.add(offset, term)
        return self.b.gep(arr.data, [offset], source_etype=mem_type(arr.elem))

    def expr_FieldLoad(self, e: ir.FieldLoad) -> lir.Value:
        return self.expr_Load(e)

    def expr_Load(self, e: ir.Load) -> lir.Value:
        arr = self.params[e.param]
        indices = [self.index(i) for i in e.indices]
        site = self.bounds_sites.get(e)
        if site is None:
            return self.load(e, arr, indices)
        # debug build: an out-of-range read is reported (first one wins) and reads as 0
        return self.checked_load(e, arr, indices, site)

    def load(self, e: ir.Load, arr: ArrayArg, indices: list[lir.Value]) -> lir.Value:
        ptr, elem = self.element_pointer(e, arr, indices)
        align = element_align(elem)
        kind = self.param_kinds.get(e.param)
        if kind == "atomic_slice":
            # other threads change an AtomicSlice during the launch: read it atomically (relaxed),
            # so a loop that waits on it reloads it every time
            return from_memory(self.b, self.b.load_atomic(ptr, "monotonic", align, typ=mem_type(elem)), elem)
        value = self.b.load(ptr, typ=mem_type(elem), align=align)
        if kind in _READ_ONLY_KINDS:
            # nothing writes a read-only parameter during the launch: lets LLVM use ld.global.nc
            value.set_metadata("invariant.load", self.module.add_metadata([]))
        return from_memory(self.b, value, elem)

    def element_pointer(self, e: ir.Load | ir.Store, arr: ArrayArg, indices: list[lir.Value]):
        """Where ``e`` reads or writes, and the type there: an element, or one field of a record's."""
        ptr = self.address(arr, indices)
        if not isinstance(e, (ir.FieldLoad, ir.FieldStore)):
            return ptr, arr.elem
        struct, slots = record_struct(arr.elem)
        field_ty, _ = arr.elem.field(e.field)
        return self.b.gep(ptr, [I32(0), I32(slots[e.field])], source_etype=struct), field_ty

    # ------------------------------------------------------------ arithmetic
    def expr_BinOp(self, e: ir.BinOp) -> lir.Value:
        lhs, rhs = self.expr(e.lhs), self.expr(e.rhs)
        ty = value_type(e.ty)
        b = self.b
        if ty.is_float and e.op in ("//", "%"):
            # Python: a // b = floor(a / b); a % b = a - b * floor(a / b), with the sign of b
            q = b.call(intrinsic(self.module, "llvm.floor", lhs.type, 1), [b.fdiv(lhs, rhs)])
            out = q if e.op == "//" else b.fsub(lhs, b.fmul(rhs, q))
            return round_half(b, out, ty)
        if ty.is_float:
            op = {"+": b.fadd, "-": b.fsub, "*": b.fmul, "/": b.fdiv}[e.op]
            out = op(lhs, rhs)
            out.flags.append("contract")   # allow fused multiply-add, as nvcc does by default
            return round_half(b, out, ty)
        signed = ty.kind == "int"
        if e.op == "//":
            return floor_div(b, lhs, rhs) if signed else b.udiv(lhs, rhs)
        if e.op == "%":
            return floor_mod(b, lhs, rhs) if signed else b.urem(lhs, rhs)
        simple = {"+": b.add, "-": b.sub, "*": b.mul, "&": b.and_, "|": b.or_, "^": b.xor, "<<": b.shl,
                  ">>": b.ashr if signed else b.lshr}
        return simple[e.op](lhs, rhs)

    def expr_UnaryOp(self, e: ir.UnaryOp) -> lir.Value:
        v = self.expr(e.operand)
        if e.op in ("not", "~"):
            return self.b.not_(v)
        return self.b.fneg(v) if value_type(e.ty).is_float else self.b.neg(v)

    def expr_Compare(self, e: ir.Compare) -> lir.Value:
        lhs, rhs = self.expr(e.lhs), self.expr(e.rhs)
        return compare(self.b, e.op, value_type(e.lhs.ty), lhs, rhs)

    def expr_Cast(self, e: ir.Cast) -> lir.Value:
        return convert(self.b, self.expr(e.value), value_type(e.value.ty), e.ty)

    # ------------------------------------------------------------ control flow inside expressions
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
        tv = self.expr(e.then)
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
