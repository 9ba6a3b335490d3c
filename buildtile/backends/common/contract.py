"""Launch contracts from a kernel decorator: block shape, limits, ``requires``.

Read statically from the decorator's AST. ``requires`` strings become the
JSON expression trees documented in ``buildtile.interop.manifest``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from buildtile.backends.common.constants import fold_constant
from buildtile.diagnostics import Diagnostic, Span

_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
MAX_BLOCK = (1024, 1024, 64)
CONTRACT_KEYS = ("block", "min_blocks", "dynamic_shared", "min_compute_capability", "requires", "cooperative")


@dataclass(frozen=True)
class ParamFacts:
    """What a requirement may say of a kernel parameter, whatever the language."""

    kind: str              # "scalar" or "array"
    rank: int              # 0 for a scalar
    is_integer_scalar: bool = False

    @classmethod
    def scalar(cls, is_int: bool) -> ParamFacts:
        return cls("scalar", 0, is_int)

    @classmethod
    def array(cls, rank: int) -> ParamFacts:
        return cls("array", rank)


class _Bad(Exception):
    def __init__(self, node: ast.AST, message: str, help: str = "") -> None:
        self.node, self.message, self.help = node, message, help


def parse_contract(decorator: ast.expr, params: dict[str, ParamFacts], consts: dict,
                   file: str, lines: list[str]) -> tuple[dict, list[Diagnostic]]:
    """The manifest ``contract`` record of ``@x.kernel(...)``; ``params`` maps name -> its facts."""
    contract = {"block": None, "index_dims": 0, "min_blocks": None, "dynamic_shared": 0,
                "min_compute_capability": None, "requires": []}
    diags: list[Diagnostic] = []
    if not isinstance(decorator, ast.Call):
        return contract, diags
    for pos in decorator.args:
        diags.append(_diag(pos, "the launch contract takes keyword arguments only", file, lines,
                           "write `@simt.kernel(block=256)`"))
    for kw in decorator.keywords:
        try:
            if kw.arg not in CONTRACT_KEYS:
                raise _Bad(kw.value, f"unknown launch contract key `{kw.arg}`", f"known keys: {', '.join(CONTRACT_KEYS)}")
            if kw.arg == "requires":
                contract["requires"] = _requires(kw.value, params, consts)
            elif kw.arg == "block":
                contract["block"] = _block(kw.value, consts)
            elif kw.arg == "min_compute_capability":
                contract["min_compute_capability"] = _compute_capability(kw.value)
            elif kw.arg == "cooperative":
                # recorded only when set, so the contracts of other kernels read as before
                if _const_bool(kw.value, consts):
                    contract["cooperative"] = True
            else:
                value = _const_int(kw.value, consts)
                if value < 0:
                    raise _Bad(kw.value, f"`{kw.arg}` must not be negative")
                contract[kw.arg] = value
        except _Bad as bad:
            diags.append(_diag(bad.node, bad.message, file, lines, bad.help))
    return contract, diags


def _diag(node, message, file, lines, help="") -> Diagnostic:
    return Diagnostic("BT0600", f"invalid launch contract: {message}", Span.of(node, file, lines), help=help)


def _const_int(node: ast.AST, consts: dict) -> int:
    value = fold_constant(node, consts)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Bad(node, f"`{ast.unparse(node)}` is not a constant integer")
    return value


def _const_bool(node: ast.AST, consts: dict) -> bool:
    value = fold_constant(node, consts)
    if not isinstance(value, bool):
        raise _Bad(node, f"`cooperative` is True or False, not `{ast.unparse(node)}`")
    return value


def _block(node: ast.AST, consts: dict) -> list[int]:
    dims = [_const_int(e, consts) for e in node.elts] if isinstance(node, ast.Tuple) else [_const_int(node, consts)]
    if not 1 <= len(dims) <= 3:
        raise _Bad(node, "`block` has 1 to 3 dimensions")
    dims += [1] * (3 - len(dims))
    for n, limit, axis in zip(dims, MAX_BLOCK, "xyz"):
        if not 1 <= n <= limit:
            raise _Bad(node, f"block.{axis} = {n} is outside 1..{limit}")
    total = dims[0] * dims[1] * dims[2]
    if total > 1024:
        raise _Bad(node, f"a block of {total} threads exceeds the limit of 1024")
    return dims


def _compute_capability(node: ast.AST) -> int:
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, str) and value.startswith("sm_") and value[3:].isdigit():
        return int(value[3:])
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float):
        return int(round(value * 10))
    raise _Bad(node, "`min_compute_capability` is written \"sm_80\", 80 or 8.0")


def _requires(node: ast.AST, params: dict[str, ParamFacts], consts: dict) -> list[dict]:
    if not isinstance(node, (ast.List, ast.Tuple)):
        raise _Bad(node, "`requires` is a list of strings")
    out = []
    for item in node.elts:
        if not (isinstance(item, ast.Constant) and isinstance(item.value, str)):
            raise _Bad(item, "each requirement is a string such as \"len(a) == len(c)\"")
        try:
            expr = ast.parse(item.value, mode="eval").body
        except SyntaxError:
            raise _Bad(item, f"`{item.value}` is not a Python expression") from None
        tree = _relation(expr, _Names(params, consts), item)
        out.append({"text": item.value, "expr": tree})
    return out


@dataclass(frozen=True)
class _Names:
    """What a name in a requirement may be: a parameter, else a module constant."""

    params: dict[str, ParamFacts]
    consts: dict


def _relation(e: ast.AST, names: _Names, where: ast.AST) -> dict:
    if isinstance(e, ast.BoolOp):
        return {"op": "and" if isinstance(e.op, ast.And) else "or",
                "args": [_relation(v, names, where) for v in e.values]}
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        return {"op": "not", "arg": _relation(e.operand, names, where)}
    if isinstance(e, ast.Compare):
        terms = [_term(e.left, names, where)] + [_term(c, names, where) for c in e.comparators]
        parts = []
        for k, op in enumerate(e.ops):
            if type(op) not in _CMP:
                raise _Bad(where, f"`{ast.unparse(op)}` is not a comparison a requirement can use")
            parts.append({"op": "cmp", "fn": _CMP[type(op)], "lhs": terms[k], "rhs": terms[k + 1]})
        return parts[0] if len(parts) == 1 else {"op": "and", "args": parts}
    raise _Bad(where, f"`{ast.unparse(e)}` is not a relation", "write a comparison such as `len(a) == len(c)`")


def _term(e: ast.AST, names: _Names, where: ast.AST) -> dict:
    if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return {"op": "const", "value": e.value}
    if isinstance(e, ast.Name) and e.id not in names.params and e.id in names.consts:
        # a module constant (the block's size, a tile's edge) reads as its value, as in `block=`
        value = names.consts[e.id]
        if not isinstance(value, int) or isinstance(value, bool):
            raise _Bad(where, f"`{e.id}` is {value!r}: a requirement compares integers")
        return {"op": "const", "value": value}
    params = names.params
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        inner = _term(e.operand, names, where)
        return {"op": "bin", "fn": "-", "lhs": {"op": "const", "value": 0}, "rhs": inner}
    if isinstance(e, ast.BinOp) and type(e.op) in _BIN:
        return {"op": "bin", "fn": _BIN[type(e.op)], "lhs": _term(e.left, names, where),
                "rhs": _term(e.right, names, where)}
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "len" and len(e.args) == 1:
        name = _param_name(e.args[0], params, where)
        if params[name].kind == "scalar":
            raise _Bad(where, f"`len({name})`: `{name}` is a scalar")
        return {"op": "len", "param": name}
    if (isinstance(e, ast.Subscript) and isinstance(e.value, ast.Attribute) and e.value.attr == "shape"
            and isinstance(e.slice, ast.Constant) and isinstance(e.slice.value, int)):
        name = _param_name(e.value.value, params, where)
        rank = params[name].rank
        if not 0 <= e.slice.value < rank:
            raise _Bad(where, f"`{name}.shape[{e.slice.value}]`: `{name}` has rank {rank}")
        return {"op": "shape", "param": name, "axis": e.slice.value}
    if isinstance(e, ast.Name):
        name = _param_name(e, params, where)
        if not params[name].is_integer_scalar:
            raise _Bad(where, f"`{name}` is not an integer scalar parameter")
        return {"op": "param", "name": name}
    raise _Bad(where, f"`{ast.unparse(e)}` cannot be used in a requirement",
               "requirements use len(p), p.shape[k], integer scalar parameters, integer constants, + - * // %")


def _param_name(e: ast.AST, params: dict, where: ast.AST) -> str:
    if isinstance(e, ast.Name) and e.id in params:
        return e.id
    raise _Bad(where, f"`{ast.unparse(e)}` is not a parameter of this kernel")
