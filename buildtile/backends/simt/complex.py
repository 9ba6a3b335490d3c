"""Complex numbers in SIMT kernels: ``complex64``/``complex128`` values, their arithmetic and
functions, as typed IR.

Every complex operation is an :class:`~buildtile.backends.simt.ir.Intrinsic` named
``complex.<op>`` (lowered in ``lower/complex.py``), so the shared typer's scalar rules
never see a complex operand. A real operand meeting a complex one becomes a complex number
with a zero imaginary part; the parts promote as reals do (a complex64 meeting an f64
gives a complex128, as in NumPy). A complex value never becomes a real one implicitly:
``.real``, ``.imag`` and ``abs()`` say which real is meant.

:class:`ComplexNumbers` is part of the SIMT typer.
"""

from __future__ import annotations

import ast

from buildtile.backends.common.typer import BaseTyper, promoted
from buildtile.backends.simt import ir
from buildtile.backends.simt.types import (
    BOOL, COMPLEX, F32, F64, Scalar, Weak, complex_of, complex_part, value_type,
)

#: operators defined for complex operands
_OPERATORS = {"+": "add", "-": "sub", "*": "mul", "/": "div"}
#: functions of one complex argument: name -> (operation, whether the result is real)
COMPLEX_FUNCTIONS = {"exp": ("exp", False), "log": ("log", False), "sqrt": ("sqrt", False),
                     "fabs": ("abs", True)}


def is_complex(ty) -> bool:
    return isinstance(ty, Scalar) and ty.kind == "complex"


class ComplexNumbers(BaseTyper):
    """Typing of complex values in the SIMT typer."""

    def literal(self, value, node):
        if isinstance(value, complex):
            self.fail("BT0200", node, "complex literals are not supported in kernels",
                      help=f"build the number from its parts: `complex128({value.real!r}, {value.imag!r})` "
                           "(or `complex64(...)`), from buildtile.types")
        return super().literal(value, node)

    def binop(self, op, lhs, rhs, node, lnode, rnode):
        if not (is_complex(value_type(lhs.ty)) or is_complex(value_type(rhs.ty))):
            return super().binop(op, lhs, rhs, node, lnode, rnode)
        if op not in _OPERATORS:
            self.fail("BT0308", node, f"operator `{op}` is not defined for complex numbers",
                      help="complex numbers have + - * /; compare their `.real`, `.imag` or `abs()`")
        ty = self.complex_join(lhs, rhs, node)
        args = [self.as_complex(lhs, ty, lnode), self.as_complex(rhs, ty, rnode)]
        return ir.Intrinsic(ty, name=f"complex.{_OPERATORS[op]}", args=args, src=node)

    def compare(self, op, lhs, rhs, node, lnode, rnode):
        if not (is_complex(value_type(lhs.ty)) or is_complex(value_type(rhs.ty))):
            return super().compare(op, lhs, rhs, node, lnode, rnode)
        if op not in ("==", "!="):
            self.fail("BT0308", node, f"complex numbers are not ordered: `{op}` is not defined for them",
                      help="compare their `.real`, `.imag` or `abs()`")
        ty = self.complex_join(lhs, rhs, node)
        args = [self.as_complex(lhs, ty, lnode), self.as_complex(rhs, ty, rnode)]
        return ir.Intrinsic(BOOL, name="complex.eq" if op == "==" else "complex.ne", args=args, src=node)

    def unary(self, op, operand, node):
        if not is_complex(value_type(operand.ty)):
            return super().unary(op, operand, node)
        if isinstance(op, ast.UAdd):
            return operand
        if not isinstance(op, ast.USub):
            self.type_mismatch(node, f"operator `{ast.unparse(node).split()[0][0]}`", "a number or bool",
                               operand.ty)
        return ir.Intrinsic(operand.ty, name="complex.neg", args=[operand], src=node)

    def coerce(self, value, ty, node):
        vt = value_type(value.ty)
        if is_complex(ty) and vt != ty:
            if is_complex(vt) and ty.bits < vt.bits:
                self.type_mismatch(node, "this value", str(ty), vt,
                                   help=f"narrow explicitly: `{ty}(z.real, z.imag)`")
            return self.as_complex(value, ty, node)
        if is_complex(vt) and vt != ty and not isinstance(ty, Weak):
            self.type_mismatch(node, "this value", str(ty), vt,
                               help="a complex number is no real: take `z.real`, `z.imag` or `abs(z)`")
        return super().coerce(value, ty, node)

    def complex_join(self, lhs: ir.Expr, rhs: ir.Expr, node: ast.AST) -> Scalar:
        """The complex type two operands meet in: the join of their parts' types."""
        parts = []
        for side in (lhs, rhs):
            ty = value_type(side.ty)
            if is_complex(ty):
                parts.append(complex_part(ty))
            elif isinstance(ty, Weak):
                continue
            elif isinstance(ty, Scalar) and ty.is_float:
                parts.append(ty)
            elif isinstance(ty, Scalar) and ty.is_int and ty.bits <= 32:
                parts.append(F32 if ty.bits <= 16 else F64)   # the float that holds every value
            elif isinstance(ty, Scalar) and ty.is_int:
                self.type_mismatch(node, "this operation", "a complex number and a float", ty,
                                   help="cast the integer to the part type first: `f64(...)`")
            else:
                self.type_mismatch(node, "this operation", "numbers", ty)
        part = parts[0]
        for other in parts[1:]:
            joined = part if part == other else promoted(part, other) if part is not None and other is not None else None
            if joined is None or not joined.is_float:
                self.type_mismatch(node, "this operation", str(complex_of(part or F32)), other,
                                   help="cast the real operand to the complex number's part type first")
            part = joined
        if part is None:
            self.type_mismatch(node, "this operation", "a complex number and a float", value_type(lhs.ty),
                               help="cast the integer to a float first")
        return complex_of(part)

    def as_complex(self, value: ir.Expr, ty: Scalar, node: ast.AST) -> ir.Expr:
        """``value`` (complex, real or a literal) as a complex number of type ``ty``."""
        vt = value_type(value.ty)
        if vt == ty:
            return value
        if is_complex(vt):
            return ir.Intrinsic(ty, name="complex.convert", args=[value], src=node)
        part = complex_part(ty)
        real = super().coerce(value, part, node) if not (isinstance(vt, Scalar) and vt.is_int) \
            else ir.Cast(part, value=value, src=node)
        return ir.Intrinsic(ty, name="complex.make", args=[real, ir.Const(part, value=0.0, src=node)], src=node)

    def complex_call(self, node: ast.Call, name: str) -> ir.Expr:
        """``complex64(re, im)``, ``complex64(x)``: a complex number from its parts."""
        ty = COMPLEX[name]
        part = complex_part(ty)
        if not 1 <= len(node.args) <= 2 or node.keywords:
            self.fail("BT0308", node, f"`{name}(re, im)` takes the real part and, optionally, the imaginary part")
        if len(node.args) == 1:
            value = self.expr(node.args[0])
            if is_complex(value_type(value.ty)):
                return ir.Intrinsic(ty, name="complex.convert", args=[value], src=node)
            return self.as_complex(self.real_part_arg(value, part, node.args[0]), ty, node)
        parts = [self.real_part_arg(self.expr(a), part, a) for a in node.args]
        return ir.Intrinsic(ty, name="complex.make", args=parts, src=node)

    def real_part_arg(self, value: ir.Expr, part: Scalar, node: ast.AST) -> ir.Expr:
        vt = value_type(value.ty)
        if is_complex(vt) or vt == BOOL or not isinstance(vt, (Scalar, Weak)):
            self.type_mismatch(node, "a part of a complex number", "a real number", value.ty)
        if isinstance(vt, Weak):
            return super().coerce(ir.Const(part, value=float(value.value), src=node) if isinstance(value, ir.Const)
                                  else value, part, node)
        return value if vt == part else ir.Cast(part, value=value, src=node)

    def complex_attribute(self, node: ast.Attribute) -> ir.Expr | None:
        """``z.real``, ``z.imag`` of a complex value; None when ``node`` is not one."""
        if node.attr not in ("real", "imag") or (
                isinstance(node.value, ast.Name) and (node.value.id in self.params or node.value.id in self.shared)
                and node.value.id not in self.locals):
            return None
        value = self.expr(node.value)
        ty = value_type(value.ty)
        if not is_complex(ty):
            self.type_mismatch(node.value, f"`.{node.attr}`", "a complex number", value.ty)
        return ir.Intrinsic(complex_part(ty), name=f"complex.{node.attr}", args=[value], src=node)

    def complex_method(self, node: ast.Call) -> ir.Expr | None:
        """``z.conjugate()``; None when ``node`` is no call of it."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "conjugate"):
            return None
        if node.args:
            self.fail("BT0308", node, "`z.conjugate()` takes no arguments")
        value = self.expr(func.value)
        if not is_complex(value_type(value.ty)):
            self.type_mismatch(func.value, "`.conjugate()`", "a complex number", value.ty)
        return ir.Intrinsic(value.ty, name="complex.conj", args=[value], src=node)

    def complex_math(self, node: ast.Call, name: str, args: list[ir.Expr]) -> ir.Expr | None:
        """``abs(z)``, ``math.exp(z)``, ``math.sqrt(z)``, ``math.log(z)``; None when no argument is
        complex."""
        if not any(is_complex(value_type(a.ty)) for a in args):
            return None
        if name not in COMPLEX_FUNCTIONS or len(args) != 1:
            self.fail("BT0425", node.func, f"`{name}` is not defined for complex numbers here",
                      help=f"complex functions: abs, {', '.join(f'math.{n}' for n in COMPLEX_FUNCTIONS if n != 'fabs')}")
        op, real = COMPLEX_FUNCTIONS[name]
        ty = value_type(args[0].ty)
        return ir.Intrinsic(complex_part(ty) if real else ty, name=f"complex.{op}", args=args, src=node)
