"""``requires`` relations of a launch contract, compiled once per kernel.

The manifest stores each relation as its source text and a small JSON tree
(see :mod:`buildtile.interop.manifest`). The C shim evaluates the same trees,
and both hosts give them the same meaning, over int64:

- ``len(x)`` is a slice's length or a tensor's ``shape[0]``; an integer
  scalar parameter is its value, a u64 above INT64_MAX wrapping to negative
  as C's ``(int64_t)`` conversion does;
- ``//`` and ``%`` round toward negative infinity, as the text reads;
- comparisons, ``and``, ``or`` and ``not`` give 0 or 1, and ``and``/``or``
  stop at the first operand that decides;
- a result outside int64, or a division by zero, makes the relation fail.

Relations are evaluated over a launch's bound values: a sequence indexed by
parameter position holding an :class:`~buildtile.runtime.arrays.ArrayView`
for array parameters and the converted number for scalars. Each relation
compiles twice from the validated tree: into closures, which explain a
failure (the value of every ``len``/``shape``/parameter it mentions), and
into a Python expression; :func:`combined_check` joins the expressions of a
kernel into one generated function, so a launch checks all its relations in
one call. Only validated integers, parameter positions and a fixed set of
operators reach the generated text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from buildtile.errors import BuildtileError

Env = Sequence[object]
Evaluator = Callable[[Env], int]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_INTEGER_DTYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")


class RequirementEvalError(ArithmeticError):
    """A relation cannot be evaluated for these arguments (int64 overflow, division by zero)."""


def _i64(value: int) -> int:
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise RequirementEvalError("int64 overflow")


def _div(lhs: int, rhs: int) -> int:
    if rhs == 0:
        raise RequirementEvalError("division by zero")
    return _i64(lhs // rhs)


def _mod(lhs: int, rhs: int) -> int:
    if rhs == 0:
        raise RequirementEvalError("division by zero")
    return lhs % rhs


def _from_u64(value: int) -> int:
    return value - 2**64 if value > INT64_MAX else value


_ARITHMETIC: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: _i64(a + b),
    "-": lambda a, b: _i64(a - b),
    "*": lambda a, b: _i64(a * b),
    "//": _div,
    "%": _mod,
}
#: how each arithmetic operator is written in generated code (names from _GENERATED_NAMES)
_ARITHMETIC_SOURCE = {"+": "I64({} + {})", "-": "I64({} - {})", "*": "I64({} * {})",
                      "//": "DIV({}, {})", "%": "MOD({}, {})"}
_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}
_GENERATED_NAMES = {"I64": _i64, "DIV": _div, "MOD": _mod, "U64": _from_u64}
#: the helpers a relation's ``source`` calls; code that embeds sources must provide them
SOURCE_NAMES = dict(_GENERATED_NAMES)

_LEAF = re.compile(r"env\[(\d+)\](?:\.shape\[(\d+)\])?")


def rename_leaves(source: str, name: Callable[[int, int | None], str]) -> str:
    """``source`` with every ``env[k].shape[axis]`` written ``name(k, axis)`` and every
    ``env[k]`` (a scalar) written ``name(k, None)``: for code that holds the values in locals."""
    return _LEAF.sub(lambda m: name(int(m.group(1)), None if m.group(2) is None else int(m.group(2))), source)


@dataclass(frozen=True)
class Requirement:
    """One compiled relation: its text, its test, and the quantities it mentions."""

    text: str
    test: Evaluator
    #: (display text, evaluator) of each len/shape/param leaf, in source order
    leaves: tuple[tuple[str, Evaluator], ...]
    #: the same test as a Python expression over ``env`` (see :func:`combined_check`)
    source: str

    def holds(self, env: Env) -> bool:
        """Whether the relation holds; raises RequirementEvalError when it cannot be evaluated."""
        return self.test(env) != 0

    def explain(self, env: Env) -> str:
        """``len(a) = 1000, len(c) = 999`` — the values the relation saw."""
        parts = []
        for text, evaluate in self.leaves:
            try:
                parts.append(f"{text} = {evaluate(env)}")
            except (IndexError, TypeError, AttributeError):
                parts.append(f"{text} = ?")
        return ", ".join(parts)


def compile_requirement(entry: dict, params: Sequence[dict], where: str) -> Requirement:
    """Compile one manifest ``requires`` entry against the kernel's parameters.

    A tree that names an unknown parameter or operator means the manifest
    does not match this runtime; that is reported as a manifest error
    (``where`` names the kernel and file), not as a launch failure.
    """
    index = {p["name"]: k for k, p in enumerate(params)}
    leaves: list[tuple[str, Evaluator]] = []
    seen: set[str] = set()
    text = entry.get("text", "<requirement>") if isinstance(entry, dict) else "<requirement>"

    def bad(reason: str) -> BuildtileError:
        return BuildtileError(
            f"{where}: cannot read requirement `{text}`: {reason}",
            code="BT0621",
            help="rebuild the package with the buildtile that is installed",
        )

    def leaf(display: str, evaluate: Evaluator) -> Evaluator:
        if display not in seen:
            seen.add(display)
            leaves.append((display, evaluate))
        return evaluate

    def array_param(name) -> tuple[int, dict]:
        if name not in index:
            raise bad(f"no parameter named {name!r}")
        param = params[index[name]]
        if param["kind"] == "scalar":
            raise bad(f"parameter {name!r} is a scalar, not an array")
        return index[name], param

    def build(node) -> tuple[Evaluator, str]:
        if not isinstance(node, dict):
            raise bad(f"expected an expression object, got {node!r}")
        op = node.get("op")
        if op == "const":
            value = node.get("value")
            if isinstance(value, bool) or not isinstance(value, int) or not INT64_MIN <= value <= INT64_MAX:
                raise bad(f"constant {value!r} is not an int64")
            return (lambda env: value), f"({int(value)})"
        if op == "len":
            k, _ = array_param(node.get("param"))
            return leaf(f"len({node['param']})", lambda env: env[k].shape[0]), f"env[{k}].shape[0]"
        if op == "shape":
            k, param = array_param(node.get("param"))
            axis = node.get("axis")
            rank = param.get("rank", 1) if param["kind"] in ("tensor", "disjoint_tensor", "tile_out", "tile_atomic") else 1
            if isinstance(axis, bool) or not isinstance(axis, int) or not 0 <= axis < rank:
                raise bad(f"axis {axis!r} is out of range for {node['param']!r} of rank {rank}")
            return (leaf(f"{node['param']}.shape[{axis}]", lambda env: env[k].shape[axis]),
                    f"env[{k}].shape[{int(axis)}]")
        if op == "param":
            name = node.get("name")
            if name not in index:
                raise bad(f"no parameter named {name!r}")
            param = params[index[name]]
            if param["kind"] != "scalar" or param["dtype"] not in _INTEGER_DTYPES:
                raise bad(f"parameter {name!r} is not an integer scalar")
            k = index[name]
            if param["dtype"] == "u64":
                return leaf(name, lambda env: _from_u64(env[k])), f"U64(env[{k}])"
            return leaf(name, lambda env: env[k]), f"env[{k}]"
        if op == "bin":
            symbol = node.get("fn")
            fn = _ARITHMETIC.get(symbol)
            if fn is None:
                raise bad(f"unknown arithmetic operator {symbol!r}")
            (lhs, lhs_src), (rhs, rhs_src) = build(node.get("lhs")), build(node.get("rhs"))
            return (lambda env: fn(lhs(env), rhs(env))), _ARITHMETIC_SOURCE[symbol].format(lhs_src, rhs_src)
        if op == "cmp":
            symbol = node.get("fn")
            fn = _COMPARE.get(symbol)
            if fn is None:
                raise bad(f"unknown comparison {symbol!r}")
            (lhs, lhs_src), (rhs, rhs_src) = build(node.get("lhs")), build(node.get("rhs"))
            # a Python bool is the int 0 or 1, as the shared semantics ask
            return (lambda env: fn(lhs(env), rhs(env))), f"({lhs_src} {symbol} {rhs_src})"
        if op in ("and", "or"):
            args = node.get("args")
            if not isinstance(args, list) or not args:
                raise bad(f"`{op}` needs a non-empty list of arguments")
            built = [build(a) for a in args]
            parts = tuple(evaluate for evaluate, _ in built)
            source = "(" + f" {op} ".join(f"{src} != 0" for _, src in built) + ")"
            if op == "and":
                return (lambda env: all(p(env) != 0 for p in parts)), source
            return (lambda env: any(p(env) != 0 for p in parts)), source
        if op == "not":
            arg, arg_src = build(node.get("arg"))
            return (lambda env: arg(env) == 0), f"({arg_src} == 0)"
        raise bad(f"unknown operation {op!r}")

    if not isinstance(entry, dict):
        raise bad(f"expected a requirement object, got {entry!r}")
    test, source = build(entry.get("expr"))
    return Requirement(text=text, test=test, leaves=tuple(leaves), source=source)


def combined_check(requirements: Sequence[Requirement]) -> Callable[[Env], int] | None:
    """One function returning the index of the first relation that fails, or -1 (None: no relations).

    A relation that cannot be evaluated (overflow, division by zero) fails.
    """
    if not requirements:
        return None
    lines = ["def check(env):"]
    for k, requirement in enumerate(requirements):
        lines += [
            "    try:",
            f"        if not {requirement.source}:",
            f"            return {k}",
            "    except ArithmeticError:",
            f"        return {k}",
        ]
    lines.append("    return -1")
    namespace: dict = {"__builtins__": {"ArithmeticError": ArithmeticError}, **_GENERATED_NAMES}
    exec(compile("\n".join(lines) + "\n", "<buildtile requires>", "exec"), namespace)
    return namespace["check"]
