"""Complex numbers as LLVM IR: a complex value is a ``{float, float}`` (or ``{double, double}``)
pair of registers, real part first, and is stored as NumPy stores it (interleaved)."""

from __future__ import annotations

import llvmlite.ir as lir

from buildtile.backends.common.llvm import F64T, intrinsic, libdevice
from buildtile.backends.simt import ir


class ComplexLowering:
    """The ``complex.<op>`` intrinsics of the SIMT lowering."""

    def complex_op(self, e: ir.Intrinsic, op: str) -> lir.Value:
        b = self.b
        args = [self.expr(a) for a in e.args]
        if op == "make":
            return self.complex_value(e, args[0], args[1])
        if op == "real":
            return b.extract_value(args[0], 0)
        if op == "imag":
            return b.extract_value(args[0], 1)
        if op == "convert":   # between complex64 and complex128
            part = self.complex_part_type(e)
            re, im = self.parts(args[0])
            widen = b.fpext if part == F64T else b.fptrunc
            return self.complex_value(e, widen(re, part), widen(im, part))
        a, c = self.parts(args[0])
        if op == "neg":
            return self.complex_value(e, b.fneg(a), b.fneg(c))
        if op == "conj":
            return self.complex_value(e, a, b.fneg(c))
        if op == "abs":
            return b.call(libdevice(self.module, "hypot", a.type, 2), [a, c])
        if op == "exp":
            scale = b.call(libdevice(self.module, "exp", a.type, 1), [a])
            cos = b.call(libdevice(self.module, "cos", a.type, 1), [c])
            sin = b.call(libdevice(self.module, "sin", a.type, 1), [c])
            return self.complex_value(e, b.fmul(scale, cos), b.fmul(scale, sin))
        if op == "log":
            size = b.call(libdevice(self.module, "hypot", a.type, 2), [a, c])
            angle = b.call(libdevice(self.module, "atan2", a.type, 2), [c, a])
            return self.complex_value(e, b.call(libdevice(self.module, "log", a.type, 1), [size]), angle)
        if op == "sqrt":
            return self.complex_sqrt(e, a, c)
        x, y = self.parts(args[1])
        if op in ("eq", "ne"):   # both parts equal (a NaN part is equal to nothing)
            same = b.and_(b.fcmp_ordered("==", a, x), b.fcmp_ordered("==", c, y))
            return same if op == "eq" else b.not_(same)
        if op == "add":
            return self.complex_value(e, b.fadd(a, x), b.fadd(c, y))
        if op == "sub":
            return self.complex_value(e, b.fsub(a, x), b.fsub(c, y))
        if op == "mul":   # (a + ci)(x + yi) = (ax - cy) + (ay + cx)i
            return self.complex_value(e, b.fsub(b.fmul(a, x), b.fmul(c, y)), b.fadd(b.fmul(a, y), b.fmul(c, x)))
        # op == "div": (a + ci)/(x + yi) = ((ax + cy) + (cx - ay)i) / (x^2 + y^2)
        norm = b.fadd(b.fmul(x, x), b.fmul(y, y))
        re = b.fdiv(b.fadd(b.fmul(a, x), b.fmul(c, y)), norm)
        im = b.fdiv(b.fsub(b.fmul(c, x), b.fmul(a, y)), norm)
        return self.complex_value(e, re, im)

    def complex_sqrt(self, e: ir.Intrinsic, a: lir.Value, c: lir.Value) -> lir.Value:
        """The principal square root: t = sqrt((|z| + |a|) / 2); for a >= 0 it is t + (c / 2t)i,
        else |c| / 2t + copysign(t, c)i (0 for z = 0)."""
        b = self.b
        t = a.type
        fabs = intrinsic(self.module, "llvm.fabs", t, 1)
        size = b.call(libdevice(self.module, "hypot", t, 2), [a, c])
        root = b.call(intrinsic(self.module, "llvm.sqrt", t, 1),
                      [b.fmul(b.fadd(size, b.call(fabs, [a])), t(0.5))])
        zero = b.fcmp_ordered("==", root, t(0.0))
        half = b.select(zero, t(1.0), b.fmul(root, t(2.0)))
        other = b.fdiv(c, half)
        nonneg = b.fcmp_ordered(">=", a, t(0.0))
        re = b.select(nonneg, root, b.call(fabs, [other]))
        im = b.select(nonneg, other, b.call(intrinsic(self.module, "llvm.copysign", t, 2), [root, c]))
        return self.complex_value(e, b.select(zero, t(0.0), re), b.select(zero, c, im))

    def parts(self, value: lir.Value) -> tuple[lir.Value, lir.Value]:
        return self.b.extract_value(value, 0), self.b.extract_value(value, 1)

    def complex_part_type(self, e: ir.Intrinsic) -> lir.Type:
        return F64T if e.ty.bits == 128 else lir.FloatType()

    def complex_value(self, e: ir.Intrinsic, re: lir.Value, im: lir.Value) -> lir.Value:
        part = self.complex_part_type(e)
        pair = lir.Constant(lir.LiteralStructType([part, part]), None)
        return self.b.insert_value(self.b.insert_value(pair, re, 0), im, 1)
