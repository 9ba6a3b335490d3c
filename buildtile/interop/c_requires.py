"""``requires`` relations compiled to C, with the Python host's meaning.

The manifest stores each relation as a JSON tree (manifest.py); the Python
host compiles it in ``buildtile.runtime.requires``, which also checks it
(c_model.py uses that check, so both hosts accept the same trees). Here each
relation becomes one block in a launcher: its argument-reading terms are
read into locals (they are also the values the error message shows), then
the relation is one C expression over int64. Arithmetic and comparisons go
through the ``bt_rq_*`` helpers of bt_runtime.h: ``//`` and ``%`` round
toward negative infinity as in Python, and an overflow or a division by
zero raises the ``bad`` flag, which fails the relation (Python's integers do
not overflow; int64 is the ABI's type). ``&&`` and ``||`` short-circuit as
Python's ``and`` and ``or`` do, so a division the relation never reaches
cannot fail.
"""

from __future__ import annotations

from buildtile.interop.c_model import Kernel
from buildtile.interop.c_syntax import string_literal
from buildtile.interop.manifest import RequirementRecord

INT64_MIN = -(2**63)

_HELPERS = {
    "+": "bt_rq_add", "-": "bt_rq_sub", "*": "bt_rq_mul", "//": "bt_rq_floordiv", "%": "bt_rq_mod",
    "==": "bt_rq_eq", "!=": "bt_rq_ne", "<": "bt_rq_lt", "<=": "bt_rq_le", ">": "bt_rq_gt", ">=": "bt_rq_ge",
}


def leaf_key(leaf: dict) -> tuple:
    """Identity of a term that reads an argument (``len``, ``shape``, ``param``)."""
    if leaf["op"] == "param":
        return ("param", leaf["name"])
    return (leaf["op"], leaf["param"], leaf.get("axis", 0))


def leaves(expr: dict) -> list[dict]:
    """The distinct argument-reading terms of a tree, in order of first appearance."""
    found: dict[tuple, dict] = {}

    def walk(e: dict) -> None:
        op = e["op"]
        if op in ("len", "shape", "param"):
            found.setdefault(leaf_key(e), e)
        for child in [e.get("lhs"), e.get("rhs"), e.get("arg"), *e.get("args", [])]:
            if child is not None:
                walk(child)

    walk(expr)
    return list(found.values())


def leaf_text(leaf: dict) -> str:
    """How a term is written in kernel source: ``len(a)``, ``a.shape[1]``, ``n``."""
    if leaf["op"] == "len":
        return f"len({leaf['param']})"
    if leaf["op"] == "shape":
        return f"{leaf['param']}.shape[{leaf['axis']}]"
    return leaf["name"]


def _leaf_source(leaf: dict, kernel: Kernel, arg_prefix: str) -> str:
    """C that reads one term from the checked arguments (``args``) or a scalar."""
    if leaf["op"] == "param":
        return f"(int64_t){arg_prefix}{leaf['name']}"
    index = [p.name for p in kernel.buffers].index(leaf["param"])
    axis = leaf.get("axis", 0)
    return f"args[{index}].shape[{axis}]"


def _constant(value: int) -> str:
    # -9223372036854775808 is not a C literal: the minus applies to a literal too large
    return "INT64_MIN" if value == INT64_MIN else f"INT64_C({value})"


def expression(expr: dict, local_of: dict[tuple, str]) -> str:
    """The C expression (an int64_t) for a checked tree; leaves are read from ``local_of``."""
    op = expr["op"]
    if op in ("len", "shape", "param"):
        return local_of[leaf_key(expr)]
    if op == "const":
        return _constant(expr["value"])
    if op == "not":
        return f"bt_rq_not({expression(expr['arg'], local_of)})"
    if op in ("and", "or"):
        joiner = " && " if op == "and" else " || "
        terms = joiner.join(f"{expression(a, local_of)} != 0" for a in expr["args"])
        return f"(int64_t)({terms})"
    lhs = expression(expr["lhs"], local_of)
    rhs = expression(expr["rhs"], local_of)
    if op == "cmp":
        return f"{_HELPERS[expr['fn']]}({lhs}, {rhs})"
    return f"{_HELPERS[expr['fn']]}({lhs}, {rhs}, &bad)"


def relation_check(req: RequirementRecord, kernel: Kernel, kernel_var: str, arg_prefix: str) -> str:
    """A C block that returns the BT0600 failure when ``req`` does not hold."""
    terms = leaves(req.expr)
    local_of = {leaf_key(leaf): f"v{i}" for i, leaf in enumerate(terms)}
    lines = [f"    {{ /* requires {req.text.replace('*/', '* /')} */", "        int bad = 0;"]
    for i, leaf in enumerate(terms):
        lines.append(f"        const int64_t v{i} = {_leaf_source(leaf, kernel, arg_prefix)};")
    lines.append(f"        const int64_t holds = {expression(req.expr, local_of)};")
    if terms:
        values_fmt = string_literal(", ".join(f"{leaf_text(leaf)} = %lld" for leaf in terms))
        values = "".join(f", (long long)v{i}" for i in range(len(terms)))
    else:  # a relation of constants; an empty format string would draw -Wformat-zero-length
        values_fmt, values = '"%s"', ', ""'

    lines += [
        "        if (bad || holds == 0)",
        (f"            return bt_fail_requires(&{kernel_var}, {string_literal(req.text)}, bad, "
         f"{values_fmt}{values});"),
        "    }",
    ]
    return "\n".join(lines)
