"""Compile-time constants: module-level bindings and the folding of constant expressions.

One folder for every place that needs a value at compile time: kernel bodies
(both languages), launch contracts and tile specializations. It folds exactly
what a kernel body folds, so a constant means the same thing everywhere.
"""

from __future__ import annotations

import ast
import math
import operator

Constant = int | float | bool

#: arithmetic operators of kernel expressions, as the IR spells them
BINOPS: dict[type, str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
    ast.Mod: "%", ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
    ast.LShift: "<<", ast.RShift: ">>",
}
CMPOPS: dict[type, str] = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
FOLD = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_,
    "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
}
#: comparisons of compile-time numbers, by CMPOPS' spelling
FOLD_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
                "!=": operator.ne}
#: the constants of ``math`` a kernel may name
MATH_CONSTANTS: dict[str, float] = {"math.inf": math.inf, "math.nan": math.nan, "math.pi": math.pi, "math.e": math.e}
#: the functions of ``math`` folded where their arguments are constants (name -> arity)
MATH_FUNCTIONS: dict[str, int] = {
    "sqrt": 1, "exp": 1, "exp2": 1, "expm1": 1, "log": 1, "log2": 1, "log10": 1, "log1p": 1,
    "sin": 1, "cos": 1, "tan": 1, "asin": 1, "acos": 1, "atan": 1, "sinh": 1, "cosh": 1, "tanh": 1,
    "erf": 1, "fabs": 1, "floor": 1, "ceil": 1, "trunc": 1, "pow": 2, "atan2": 2, "hypot": 2, "copysign": 2,
}
#: operators defined for integers (and bools) only
INTEGER_OPS = ("&", "|", "^", "<<", ">>")
#: the largest exponent or shift folded: bigger ones are certainly a mistake in a kernel
_MAX_FOLDED_SHIFT = 64


def fold_binop(op: str, lhs: int | float, rhs: int | float) -> int | float:
    """``lhs op rhs`` as Python computes it; raises ArithmeticError or ValueError where Python would,
    and ValueError for the forms a kernel does not fold (a float in a bitwise operation, a negative
    integer power, a huge shift or power)."""
    if op in INTEGER_OPS and (isinstance(lhs, float) or isinstance(rhs, float)):
        raise ValueError(f"`{op}` takes integers")
    if op in ("<<", ">>", "**") and isinstance(rhs, int) and not 0 <= rhs <= _MAX_FOLDED_SHIFT:
        raise ValueError(f"`{op}` by {rhs}")
    value = FOLD[op](lhs, rhs)
    if isinstance(value, complex):
        raise ValueError("a complex result")
    return value


def fold_math(dotted: str | None, args: list) -> Constant | None:
    """``math.<name>(*args)`` of constant numbers, as Python computes it, or None (not a folded
    function, a wrong arity, a bool argument, a domain error or an overflow)."""
    name = dotted[len("math."):] if dotted and dotted.startswith("math.") else None
    if name not in MATH_FUNCTIONS or len(args) != MATH_FUNCTIONS[name] \
            or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
        return None
    if name == "exp2":      # math.exp2 is new in Python 3.11
        return fold_binop("**", 2.0, float(args[0])) if abs(args[0]) < 1100 else None
    try:
        return getattr(math, name)(*args)
    except (ArithmeticError, ValueError):
        return None


def math_names(module_ast: ast.Module) -> dict[str, str]:
    """How a module spells ``math`` and its members: ``{"math": "math", "m": "math", "log": "math.log"}``."""
    names: dict[str, str] = {}
    for stmt in module_ast.body:
        if isinstance(stmt, ast.Import):
            names.update({a.asname or a.name: "math" for a in stmt.names if a.name == "math"})
        elif isinstance(stmt, ast.ImportFrom) and stmt.module == "math" and not stmt.level:
            names.update({a.asname or a.name: f"math.{a.name}" for a in stmt.names})
    return names


def _math_dotted(node: ast.AST, names: dict[str, str]) -> str | None:
    """``math.log`` for ``math.log`` / ``m.log`` / ``log`` as the module imported them."""
    if isinstance(node, ast.Name):
        return names.get(node.id) if names.get(node.id, "").startswith("math.") else None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and names.get(node.value.id) == "math":
        return f"math.{node.attr}"
    return None


def fold_constant(node: ast.AST, consts: dict[str, Constant], names: dict[str, str] | None = None) -> Constant | None:
    """The value of a constant expression over literals and ``consts``, or None; with ``names``
    (:func:`math_names`) ``math`` constants and functions of constants fold too.

    Bools fold only as themselves: ``True + 1`` is an error in a kernel, so it is no constant.
    """
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
        return node.value
    if isinstance(node, ast.Name) and node.id in consts:
        return consts[node.id]
    if names and isinstance(node, (ast.Attribute, ast.Name)):
        dotted = _math_dotted(node, names)
        return MATH_CONSTANTS.get(dotted) if dotted else None
    if names and isinstance(node, ast.Call) and not node.keywords:
        args = [fold_constant(a, consts, names) for a in node.args]
        return None if None in args else fold_math(_math_dotted(node.func, names), args)
    if isinstance(node, ast.UnaryOp):
        v = fold_constant(node.operand, consts, names)
        if v is None or isinstance(v, bool):
            return None
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.Invert) and isinstance(v, int):
            return ~v
        return None
    if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
        lhs, rhs = fold_constant(node.left, consts, names), fold_constant(node.right, consts, names)
        if lhs is None or rhs is None or isinstance(lhs, bool) or isinstance(rhs, bool):
            return None
        try:
            return fold_binop(BINOPS[type(node.op)], lhs, rhs)
        except (ArithmeticError, ValueError):
            return None
    return None


def module_constants(module_ast: ast.Module) -> dict[str, Constant]:
    """Module-level ``NAME = <constant expression>`` bindings (a later non-constant one unbinds);
    the expression may use ``math`` constants and functions (``LOG2E = 1.0 / math.log(2)``)."""
    consts: dict[str, Constant] = {}
    names = math_names(module_ast)
    for stmt in module_ast.body:
        target, value = None, None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        if isinstance(target, ast.Name):
            folded = fold_constant(value, consts, names)
            if folded is not None:
                consts[target.id] = folded
            else:
                consts.pop(target.id, None)
    return consts


def constant_tuples(module_ast: ast.Module, consts: dict[str, Constant]) -> dict[str, tuple]:
    """Module-level ``NAME = (c0, c1, ...)`` bindings whose items are all constant numbers
    (a later rebinding of the name unbinds it)."""
    tuples: dict[str, tuple] = {}
    for stmt in module_ast.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            continue
        name = stmt.targets[0].id
        tuples.pop(name, None)
        if isinstance(stmt.value, ast.Tuple) and stmt.value.elts:
            items = tuple(fold_constant(e, consts) for e in stmt.value.elts)
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
                tuples[name] = items
    return tuples
