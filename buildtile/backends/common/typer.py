"""The typer both kernel languages build on: a kernel's Python AST -> typed IR.

It walks statements and expressions, reports diagnostics, and owns every
*scalar* rule, so a scalar expression means the same in SIMT and Tile
kernels: literals are weakly typed (they take the type of what they meet,
and default to i64/f32), typed values of different types meet by lossless
widening (or an integer meets a float and takes the float's type; see
:func:`promoted`), constant expressions fold, arithmetic, comparisons
(chained ones too), ``and``/``or``/``not``, conditional expressions and
casts follow one set of rules. A language's typer extends :class:`BaseTyper`
with its own statements and values (thread geometry, tiles ...) and overrides
the hooks where a non-scalar operand changes the rule (``binop``, ``unary``,
``compare``, ``select``, ``cast``).

Errors are collected as diagnostics, never raised out of the typer: a failing
statement raises :class:`Abort` after its diagnostic, the block goes on with
the next, so one build reports every problem of a kernel.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable

from buildtile.backend import KernelSource
from buildtile.backends.common import ir
from buildtile.backends.common.constants import BINOPS, CMPOPS, INTEGER_OPS, fold_binop, module_constants
from buildtile.backends.common.types import BOOL, F64, SCALARS, WEAK_FLOAT, WEAK_INT, Scalar, Weak
from buildtile.diagnostics import Diagnostic, Span


class Abort(Exception):
    """Stops typing one statement after its diagnostic was recorded."""


#: the largest finite value of each float type (IEEE half, bfloat16, single); f64 holds every Python float
FLOAT_MAX = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38}

class BaseTyper:
    """Statement and expression dispatch, diagnostics and the scalar rules."""

    #: what the language calls its kernels, in messages ("kernels", "tile kernels")
    kernels = "kernels"
    #: where a refused form's help points when the language has no specific advice
    reference = "see the language reference"
    #: help for refused statement and expression kinds, by ``ast`` class name
    unsupported_help: dict[str, str] = {}
    #: what an operand of arithmetic may be, for messages
    operands = "scalars"

    def __init__(self, source: KernelSource) -> None:
        self.src = source
        self.ns = source.namespace
        self.consts = module_constants(source.module_ast)
        self.diagnostics: list[Diagnostic] = []
        self.params: dict[str, ir.Param] = {}
        self.locals: dict[str, object] = {}
        self.poisoned: set[str] = set()

    # ------------------------------------------------------------ reporting
    def error(self, code: str, node: ast.AST, message: str, label: str = "", help: str = "") -> None:
        span = Span.of(node, self.src.display_file, self.src.lines)
        self.diagnostics.append(Diagnostic(code, message, span, label=label, help=help))

    def fail(self, code: str, node: ast.AST, message: str, label: str = "", help: str = ""):
        self.error(code, node, message, label, help)
        raise Abort

    def type_mismatch(self, node: ast.AST, what: str, expected, found, help: str = ""):
        self.fail("BT0308", node, "mismatched types", label=f"{what}: expected {expected}, found {found}", help=help)

    # ------------------------------------------------------------ language hooks
    def value_type(self, ty):
        """The arithmetic type a value acts as (a thread index or tile id acts as an i64)."""
        return ty

    def name_value(self, name: str, node: ast.Name) -> ir.Expr | None:
        """The value of a local or parameter ``name``, or None when it is neither."""
        return None

    def fold(self, node: ast.AST) -> ir.Expr | None:
        """A literal for ``node`` when the language folds it before typing it."""
        return None

    def refine(self, name: str, ty: Scalar, node: ast.AST) -> None:
        """A weakly typed local met the concrete type ``ty`` (languages whose locals stay weak)."""

    def retype_other(self, value: ir.Expr, ty: Scalar) -> ir.Expr:
        """Give a weakly typed language-specific node the type ``ty``."""
        value.ty = ty
        return value

    def check_update_target(self, target: ast.AST) -> None:
        """Refuse an augmented-assignment target the language cannot update."""

    def assign(self, target: ast.AST, value_node: ast.AST, node: ast.stmt):
        raise NotImplementedError

    def declare_local(self, name: str, ty: Scalar) -> None:
        """A new local of type ``ty``, before the body binds it."""
        raise NotImplementedError

    def param_value(self, param: ir.Param) -> ir.Expr:
        """The value of a scalar parameter."""
        raise NotImplementedError

    def check_assignable(self, target: ast.Name) -> None:
        """Parameters (but their local copies) and module-level names are not assigned."""
        name = target.id
        if name in self.params and name not in self.locals:
            self.fail("BT0594", target, f"cannot assign to parameter `{name}`",
                      label=f"`{name}` is a {self.params[name].ty}, a borrowed view",
                      help="bind the value to a new local name")
        if name in self.consts or name in self.ns:
            self.fail("BT0308", target, f"cannot assign to `{name}`: it names a module-level constant or import",
                      help="use a different local name")

    # ------------------------------------------------------------ the kernel's signature
    def kernel_params(self, fn: ast.FunctionDef, parse: Callable[[ast.AST | None, dict[str, str]], tuple],
                      help: str) -> list[ir.Param]:
        """The kernel's parameters, typed by the language's ``parse`` of an annotation (type or None,
        and why not); a parameter with a bad annotation is reported and poisoned."""
        args = fn.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            self.error("BT0200", fn, "kernels take plain positional parameters only",
                       help="remove *args, **kwargs, keyword-only parameters and defaults")
        params = []
        for a in args.args:
            ty, why = parse(a.annotation, self.ns)
            if ty is None:
                self.error("BT0308", a.annotation or a, f"bad type for parameter `{a.arg}`: {why}", help=help)
                self.poisoned.add(a.arg)
                continue
            p = ir.Param(a.arg, ty, a)
            self.params[a.arg] = p
            params.append(p)
        return params

    def copy_reassigned_params(self, fn: ast.FunctionDef, params: list[ir.Param]) -> list[ir.Stmt]:
        """A scalar parameter assigned in the body is a local copy, as in Python."""
        assigned = set().union(*(assigned_names(stmt, deep=True) for stmt in fn.body))
        copies = []
        for p in params:
            if p.name in assigned and isinstance(p.ty, Scalar):
                self.declare_local(p.name, p.ty)
                copies.append(ir.Assign(name=p.name, value=self.param_value(p), src=p.src))
        return copies

    def check_returns_nothing(self, fn: ast.FunctionDef, help: str) -> None:
        if fn.returns is not None and not (isinstance(fn.returns, ast.Constant) and fn.returns.value is None):
            self.error("BT0308", fn.returns, "kernels return nothing", help=help)

    # ------------------------------------------------------------ statements
    def block(self, stmts: list[ast.stmt]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for stmt in stmts:
            try:
                result = self.stmt(stmt)
            except Abort:
                # names this statement failed to bind are poisoned: their later uses stay quiet
                self.poisoned.update(assigned_names(stmt) - set(self.locals))
                continue
            if result is None:
                continue
            out.extend(r for r in (result if isinstance(result, list) else [result]) if r is not None)
        return out

    def stmt(self, node: ast.stmt):
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            self.fail("BT0200", node, f"`{type(node).__name__}` statements are not supported in {self.kernels}",
                      help=self.unsupported_help.get(type(node).__name__, self.reference))
        return method(node)

    def stmt_Pass(self, node: ast.Pass):
        return None

    def stmt_Expr(self, node: ast.Expr):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # docstring
        return self.expression_statement(node)

    def expression_statement(self, node: ast.Expr):
        self.expr(node.value)
        self.fail("BT0200", node, "expression statement has no effect", help="assign the value to a name")

    def stmt_Assign(self, node: ast.Assign):
        if len(node.targets) != 1:
            self.fail("BT0200", node, "chained assignment is not supported", help="assign one target at a time")
        return self.assign(node.targets[0], node.value, node)

    def stmt_AugAssign(self, node: ast.AugAssign):
        op = BINOPS.get(type(node.op))
        if op == "**":
            self.fail("BT0200", node, f"operator `**=` is not supported in {self.kernels}",
                      label="no power of run-time values",
                      help=f"write `{_target_text(node)} = {_target_text(node)} * {_target_text(node)}` for a square, "
                           f"or `math.pow(...)` for a float power")
        if op is None:
            self.fail("BT0200", node, f"operator `{_operator_text(node.op)}=` is not supported in {self.kernels}")
        self.check_update_target(node.target)
        synthetic = ast.BinOp(left=as_load(node.target), op=node.op, right=node.value)
        ast.copy_location(synthetic, node)
        synthetic.end_lineno, synthetic.end_col_offset = node.end_lineno, node.end_col_offset
        return self.assign(node.target, synthetic, node)

    def stmt_If(self, node: ast.If):
        cond = self.condition(node.test)
        if isinstance(cond, ir.Const):
            # a condition known when the kernel is compiled (of tile shapes, module constants):
            # only the branch it takes is typed, so the other may hold what this specialization
            # cannot (tiles of other shapes), as Triton's constexpr branches
            return self.block(node.body if cond.value else node.orelse)
        return ir.If(cond=cond, then=self.block(node.body), orelse=self.block(node.orelse), src=node)

    # ------------------------------------------------------------ expressions
    def expr(self, node: ast.AST) -> ir.Expr:
        folded = self.fold(node)
        if folded is not None:
            return folded
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            self.fail("BT0200", node, f"`{type(node).__name__}` expressions are not supported in {self.kernels}",
                      help=self.unsupported_help.get(type(node).__name__, self.reference))
        return method(node)

    def literal(self, value, node: ast.AST) -> ir.Const:
        if isinstance(value, bool):
            return ir.Const(BOOL, value=value, src=node)
        if isinstance(value, int):
            return ir.Const(WEAK_INT, value=value, src=node)
        if isinstance(value, float):
            return ir.Const(WEAK_FLOAT, value=value, src=node)
        self.fail("BT0200", node, f"{type(value).__name__} literals are not supported in {self.kernels}",
                  help="kernels compute on numbers and booleans")

    def expr_Constant(self, node: ast.Constant):
        return self.literal(node.value, node)

    def expr_Name(self, node: ast.Name):
        name = node.id
        if name in self.poisoned and name not in self.locals:
            raise Abort  # its binding already failed with a diagnostic
        value = self.name_value(name, node)
        if value is not None:
            return value
        if name in self.consts:
            return self.literal(self.consts[name], node)
        if name in ("True", "False"):
            return ir.Const(BOOL, value=name == "True", src=node)
        if name in _module_strings(self.src.module_ast):
            self.fail("BT0200", node, f"`{name}` is a string: strings are not kernel values",
                      label="a module-level string", help=f"{self.kernels} compute on numbers and booleans")
        self.fail("BT0425", node, f"cannot find value `{name}` in this scope", label="not found",
                  help="kernels see their parameters, their locals and module-level constants")

    def expr_BinOp(self, node: ast.BinOp):
        op = BINOPS.get(type(node.op))
        if op is None:
            self.fail("BT0200", node, f"operator `{_operator_text(node.op)}` is not supported in {self.kernels}")
        lhs, rhs = self.expr(node.left), self.expr(node.right)
        return self.binop(op, lhs, rhs, node, node.left, node.right)

    def binop(self, op: str, lhs: ir.Expr, rhs: ir.Expr, node: ast.AST, lnode: ast.AST, rnode: ast.AST) -> ir.Expr:
        return self.scalar_binop(op, lhs, rhs, node, lnode, rnode)

    def scalar_binop(self, op: str, lhs: ir.Expr, rhs: ir.Expr, node: ast.AST, lnode: ast.AST,
                     rnode: ast.AST) -> ir.Expr:
        if _is_weak_const(lhs) and _is_weak_const(rhs):
            try:
                value = fold_binop(op, lhs.value, rhs.value)
            except ZeroDivisionError:
                self.fail("BT0080", node, "division by zero in a constant expression")
            except (ArithmeticError, ValueError):
                pass   # not a constant: the rules below say why
            else:
                return self.literal(value, node)
        if op == "**":
            self.fail("BT0200", node, f"operator `**` is not supported in {self.kernels}",
                      label="no power of run-time values",
                      help="write `x * x` for a square, or `math.pow(x, y)` for a float power")
        ty = self.unify(lhs, rhs, node)
        lhs, rhs = self.coerce(lhs, ty, lnode), self.coerce(rhs, ty, rnode)
        concrete = ty.default if isinstance(ty, Weak) else ty
        self.check_operator(op, concrete, node)
        if op in ("<<", ">>"):
            self.check_shift(rhs, concrete, rnode)
        if op == "/" and not concrete.is_float:
            # Python: true division of integers gives a float (a double)
            lhs, rhs = (ir.Cast(F64, value=self.defaulted(v), src=v.src) for v in (lhs, rhs))
            return ir.BinOp(F64, op="/", lhs=lhs, rhs=rhs, src=node)
        return ir.BinOp(ty, op=op, lhs=lhs, rhs=rhs, src=node)

    def check_operator(self, op: str, dtype: Scalar, node: ast.AST) -> None:
        """``op`` is defined for operands of ``dtype`` (a scalar or a tile's element type)."""
        if dtype == BOOL and op not in ("&", "|", "^"):
            self.type_mismatch(node, f"operator `{op}`", "numbers", dtype, help="convert to an integer type first")
        if op in INTEGER_OPS and dtype.is_float:
            self.type_mismatch(node, f"operator `{op}`", "integers", dtype)

    def check_shift(self, amount: ir.Expr, dtype: Scalar, node: ast.AST) -> None:
        """A constant shift amount is within the width of ``dtype``."""
        if isinstance(amount, ir.Const) and not 0 <= amount.value < dtype.bits:
            self.fail("BT0308", node, f"shift by {amount.value} is out of range for {dtype}",
                      label=f"{dtype} shifts by 0..{dtype.bits - 1}")

    def expr_UnaryOp(self, node: ast.UnaryOp):
        return self.unary(node.op, self.expr(node.operand), node)

    def unary(self, op: ast.unaryop, operand: ir.Expr, node: ast.UnaryOp) -> ir.Expr:
        if isinstance(op, ast.UAdd):
            return operand
        if isinstance(op, ast.Not):
            return ir.UnaryOp(BOOL, op="not", operand=self.as_bool(operand, node.operand, "not"), src=node)
        ty = self.value_type(operand.ty)
        if isinstance(op, ast.USub):
            if _is_weak_const(operand):
                return ir.Const(ty, value=-operand.value, src=node)
            if ty == BOOL or not isinstance(ty, (Scalar, Weak)):
                self.type_mismatch(node, "unary `-`", "a number", ty)
            return ir.UnaryOp(ty, op="-", operand=self.coerce(operand, ty, node), src=node)
        # ~: bitwise for integers, logical for bools
        if not (ty == BOOL or is_intlike(ty)):
            self.type_mismatch(node, "operator `~`", "an integer or bool", ty)
        if _is_weak_const(operand):
            return ir.Const(ty, value=~operand.value, src=node)
        return ir.UnaryOp(ty, op="~", operand=self.coerce(operand, ty, node), src=node)

    def expr_Compare(self, node: ast.Compare):
        if len(node.ops) != 1:
            # a < b < c  ==  (a < b) and (b < c); b is evaluated twice, which is safe: it has no side effects
            parts = []
            left = node.left
            for op, right in zip(node.ops, node.comparators):
                piece = ast.Compare(left=left, ops=[op], comparators=[right])
                ast.copy_location(piece, node)
                piece.end_lineno, piece.end_col_offset = node.end_lineno, node.end_col_offset
                part = self.expr_Compare(piece)
                if part.ty != BOOL:
                    self.fail("BT0308", node, "a chained comparison compares scalars",
                              help="combine elementwise comparisons with `&`: `(a < b) & (b < c)`")
                parts.append(part)
                left = right
            return ir.BoolOp(BOOL, op="and", values=parts, src=node)
        op = CMPOPS.get(type(node.ops[0]))
        if op is None:
            self.fail("BT0200", node, f"`in`/`is` comparisons are not supported in {self.kernels}",
                      help="compare values with == or !=")
        lhs, rhs = self.expr(node.left), self.expr(node.comparators[0])
        return self.compare(op, lhs, rhs, node, node.left, node.comparators[0])

    def compare(self, op: str, lhs: ir.Expr, rhs: ir.Expr, node: ast.AST, lnode: ast.AST, rnode: ast.AST) -> ir.Expr:
        ty = self.unify(lhs, rhs, node)
        return ir.Compare(BOOL, op=op, lhs=self.coerce(lhs, ty, lnode), rhs=self.coerce(rhs, ty, rnode), src=node)

    def expr_BoolOp(self, node: ast.BoolOp):
        op = "and" if isinstance(node.op, ast.And) else "or"
        values = [self.as_bool(self.expr(v), v, "boolop") for v in node.values]
        return ir.BoolOp(BOOL, op=op, values=values, src=node)

    def expr_IfExp(self, node: ast.IfExp):
        cond = self.as_bool(self.expr(node.test), node.test, "ifexp")
        return self.select(cond, self.expr(node.body), self.expr(node.orelse), node)

    def select(self, cond: ir.Expr, then: ir.Expr, orelse: ir.Expr, node: ast.IfExp) -> ir.Expr:
        ty = self.unify(then, orelse, node)
        return ir.Select(ty, cond=cond, then=self.coerce(then, ty, node.body),
                         orelse=self.coerce(orelse, ty, node.orelse), src=node)

    # ------------------------------------------------------------ casts
    def cast_call(self, node: ast.Call, dotted: str) -> ir.Expr:
        """``f32(x)``, ``i64(x)`` ...: ``dotted`` is the callee under ``buildtile.types``."""
        target = SCALARS.get(dotted.rsplit(".", 1)[-1])
        if target is None:
            self.fail("BT0425", node.func, f"`{ast.unparse(node.func)}` is not a scalar type to cast to")
        if len(node.args) != 1 or node.keywords:
            self.fail("BT0308", node, f"the cast `{ast.unparse(node.func)}(...)` takes exactly one argument, "
                      f"{len(node.args) + len(node.keywords)} given")
        return self.cast(self.expr(node.args[0]), target, node)

    def cast(self, value: ir.Expr, target: Scalar, node: ast.Call) -> ir.Expr:
        vt = self.value_type(value.ty)
        if _is_weak_const(value) and target == BOOL:
            return self.coerce(value, target, node)   # refused: write the comparison meant
        if _is_weak_const(value):
            # a literal converts at compile time, as Python's int() and float() do
            converted = float(value.value) if target.is_float else int(value.value)
            return self.coerce(ir.Const(WEAK_FLOAT if target.is_float else WEAK_INT, value=converted, src=node),
                               target, node)
        if not isinstance(vt, (Scalar, Weak)):
            self.type_mismatch(node.args[0], "a cast", "a scalar", value.ty)
        return ir.Cast(target, value=self.defaulted(value), src=node)

    # ------------------------------------------------------------ typing helpers
    def condition(self, node: ast.AST) -> ir.Expr:
        return self.as_bool(self.expr(node), node, "condition")

    def as_bool(self, value: ir.Expr, node: ast.AST, context: str) -> ir.Expr:
        """``value`` used as a condition: of ``if``/``while`` ("condition"), ``not``, ``and``/``or``
        ("boolop") or ``a if cond else b`` ("ifexp")."""
        if value.ty != BOOL:
            self.type_mismatch(node, "`not`" if context == "not" else "a condition", "bool", value.ty,
                               help="compare explicitly, e.g. `x != 0`")
        return value

    def unify(self, lhs: ir.Expr, rhs: ir.Expr, node: ast.AST):
        """The type both operands of a scalar operation take."""
        lt, rt = self.value_type(lhs.ty), self.value_type(rhs.ty)
        for side in (lt, rt):
            if not isinstance(side, (Scalar, Weak)):
                self.type_mismatch(node, "this operation", self.operands, side)
        if lt == rt:
            return lt
        if isinstance(lt, Weak) and isinstance(rt, Weak):
            return WEAK_FLOAT
        if isinstance(lt, Weak) or isinstance(rt, Weak):
            weak, strong = (lt, rt) if isinstance(lt, Weak) else (rt, lt)
            if strong == BOOL:
                self.type_mismatch(node, "this operation", "numbers", strong)
            if weak.kind == "float" and not strong.is_float:
                return weak.default   # an integer meeting a float takes the float's type
            return strong
        ty = promoted(lt, rt)
        if ty is None:
            self.type_mismatch(node, "this operation", str(lt), rt, help=_mix_help(lt, rt))
        return ty

    def unify_all(self, values: list[ir.Expr], node: ast.AST):
        ty = self.value_type(values[0].ty)
        for v in values[1:]:
            ty = self.unify(ir.Expr(ty), v, node)
        return ty

    def coerce(self, value: ir.Expr, ty, node: ast.AST) -> ir.Expr:
        """Give a weakly typed value the concrete type ``ty``, convert a typed one that
        :func:`converts` implicitly, or refuse the mix."""
        vt = self.value_type(value.ty)
        if isinstance(ty, Weak) or vt == ty:
            return value
        if isinstance(vt, Weak):
            if vt.kind == "float" and not ty.is_float:
                self.type_mismatch(node, "this value", str(ty), vt)
            if ty == BOOL:
                self.type_mismatch(node, "this value", "bool", vt)
            return self.retype(value, ty)
        if isinstance(vt, Scalar) and isinstance(ty, Scalar) and converts(vt, ty):
            return ir.Cast(ty, value=value, src=value.src or node)
        self.type_mismatch(node, "this value", str(ty), vt, help=f"cast explicitly: `{ty}(...)`")

    def retype(self, value: ir.Expr, ty: Scalar) -> ir.Expr:
        """A weakly typed value, built from literals and weak locals, as a value of type ``ty``."""
        if isinstance(value, ir.Const):
            if ty.is_int:
                lo, hi = (0, 2 ** ty.bits - 1) if ty.kind == "uint" else (-(2 ** (ty.bits - 1)), 2 ** (ty.bits - 1) - 1)
                if not lo <= value.value <= hi:
                    self.fail("BT0308", value.src, f"literal `{value.value}` out of range for {ty}",
                              label=f"{ty} holds {lo}..{hi}", help="use a wider type, or cast explicitly")
            elif ty.is_float and math.isfinite(value.value) and abs(value.value) > FLOAT_MAX.get(ty.name, math.inf):
                # a finite literal that the type would round to infinity (an infinity itself is one of its values)
                self.fail("BT0308", value.src, f"literal `{value.value}` out of range for {ty}",
                          label=f"the largest finite {ty} is {FLOAT_MAX[ty.name]:.6g}",
                          help="use a wider type, or cast explicitly")
            return ir.Const(ty, value=float(value.value) if ty.is_float else value.value, src=value.src)
        if isinstance(value, ir.Var):
            self.refine(value.name, ty, value.src)
            return ir.Var(ty, name=value.name, src=value.src)
        if isinstance(value, ir.BinOp):
            return ir.BinOp(ty, op=value.op, lhs=self.retype(value.lhs, ty), rhs=self.retype(value.rhs, ty),
                            src=value.src)
        if isinstance(value, ir.UnaryOp):
            return ir.UnaryOp(ty, op=value.op, operand=self.retype(value.operand, ty), src=value.src)
        if isinstance(value, ir.Select):
            return ir.Select(ty, cond=value.cond, then=self.retype(value.then, ty),
                             orelse=self.retype(value.orelse, ty), src=value.src)
        return self.retype_other(value, ty)

    def defaulted(self, value: ir.Expr) -> ir.Expr:
        vt = value.ty
        return self.retype(value, vt.default) if isinstance(vt, Weak) else value

    def finalize(self, body: list[ir.Stmt]) -> None:
        """Literals that never met a concrete type take their defaults (i64, f32)."""
        for e in ir.walk_exprs(body):
            if isinstance(e.ty, Weak):
                e.ty = e.ty.default
                if isinstance(e, ir.Const):
                    e.value = float(e.value) if e.ty.is_float else int(e.value)


_NUMERIC = ("int", "uint", "float")


def widens(src: Scalar, dst: Scalar) -> bool:
    """``dst`` holds every value of ``src`` exactly and is of its kind: i32 -> i64, u32 -> u64,
    f16/bf16 -> f32 -> f64 (f16 and bf16 hold different values: neither widens to the other)."""
    return src.kind == dst.kind and src.kind in _NUMERIC and dst.bits > src.bits


def converts(src: Scalar, dst: Scalar) -> bool:
    """A value of ``src`` becomes a ``dst`` without a cast: a lossless widening, or an
    integer becoming a float (the float's precision is what the program asked for)."""
    return src == dst or widens(src, dst) or (src.is_int and dst.is_float)


def promoted(a: Scalar, b: Scalar) -> Scalar | None:
    """The type two different typed scalars meet in, or None when the mix must be a cast:
    the wider of one kind, the float when an integer meets a float (as in Triton);
    signed with unsigned, f16 with bf16 and anything with bool stay explicit."""
    if widens(a, b):
        return b
    if widens(b, a):
        return a
    if a.kind in _NUMERIC and b.kind in _NUMERIC and a.is_float != b.is_float:
        return a if a.is_float else b
    return None


def _mix_help(a: Scalar, b: Scalar) -> str:
    if a.is_int and b.is_int and a.kind != b.kind:
        signed, unsigned = (a, b) if a.kind == "int" else (b, a)
        wide = SCALARS["i64"] if max(a.bits, b.bits) < 64 else signed
        return (f"signed and unsigned integers do not mix implicitly; cast one side, "
                f"e.g. `{wide}(...)` or `{unsigned}(...)`")
    return f"cast one side explicitly, e.g. `{a}(...)` or `{b}(...)`"


def assigned_names(stmt: ast.stmt, deep: bool = False) -> set[str]:
    """Plain names a statement binds (``deep``: in nested blocks too)."""
    if deep:
        nodes = ast.walk(stmt)
    else:
        nodes = []
        if isinstance(stmt, ast.Assign):
            nodes = [n for t in stmt.targets for n in ast.walk(t)]
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For)):
            nodes = list(ast.walk(stmt.target))
    return {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _module_strings(module_ast: ast.Module) -> set[str]:
    """Module-level names bound to a string literal."""
    return {t.id for stmt in module_ast.body if isinstance(stmt, (ast.Assign, ast.AnnAssign))
            and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)
            for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]) if isinstance(t, ast.Name)}


def is_intlike(ty) -> bool:
    """An integer, or an integer literal not yet typed."""
    return (isinstance(ty, Weak) and ty.kind == "int") or (isinstance(ty, Scalar) and ty.is_int)


def _is_weak_const(value: ir.Expr) -> bool:
    return isinstance(value, ir.Const) and isinstance(value.ty, Weak)


def as_load(target: ast.AST) -> ast.AST:
    """An assignment target re-read as a value (``c[i] += v`` reads ``c[i]``), at the target's place."""
    clone = ast.parse(ast.unparse(target), mode="eval").body
    for new, old in zip(ast.walk(clone), ast.walk(target)):
        ast.copy_location(new, old)
        new.end_lineno = getattr(old, "end_lineno", None)
        new.end_col_offset = getattr(old, "end_col_offset", None)
    return clone


def _target_text(node: ast.AugAssign) -> str:
    return ast.unparse(node.target)


def _operator_text(op: ast.operator) -> str:
    return {ast.MatMult: "@"}.get(type(op), type(op).__name__)
