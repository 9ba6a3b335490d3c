"""Dtype variables: ``T = tile.dtype_var("T", f16, bf16, f32)`` at module level.

A kernel whose parameter annotations name ``T`` (``Tensor[T, 2]``) is
generic over it: it is typed and compiled once per dtype, by typing it with
``T`` bound to that dtype in the module's namespace (so ``tile.zeros(s, T)``,
``x.astype(T)`` and ``T(v)`` mean the bound dtype). The first dtype listed is
the variable's default.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from buildtile.backend import KernelSource
from buildtile.backends.tile.params import TILE_MODULE, TYPES_MODULE
from buildtile.backends.tile.types import TILE_DTYPES
from buildtile.discovery import resolve_dotted


@dataclass(frozen=True)
class DtypeVar:
    name: str
    dtypes: tuple[str, ...]     # dtype names, the default first; empty: a product must list them
    node: ast.AST


def dtype_name(node: ast.AST, namespace: dict[str, str]) -> str | None:
    """``f16`` (an imported buildtile.types dtype a tile may hold) -> ``"f16"``; else None."""
    dotted = resolve_dotted(node, namespace)
    if dotted and dotted.startswith(TYPES_MODULE + "."):
        ty = dotted[len(TYPES_MODULE) + 1:]
        name = "bool" if ty == "bool_" else ty
        return name if name in TILE_DTYPES else None
    return None


def module_dtype_vars(source: KernelSource, error) -> dict[str, DtypeVar]:
    """Every module-level ``NAME = tile.dtype_var("NAME", dtypes...)``; ``error(node, message, help)``."""
    found: dict[str, DtypeVar] = {}
    for stmt in source.module_ast.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Call)
                and resolve_dotted(stmt.value.func, source.namespace) == TILE_MODULE + ".dtype_var"):
            continue
        name, call = stmt.targets[0].id, stmt.value
        if not call.args or not (isinstance(call.args[0], ast.Constant) and call.args[0].value == name) \
                or call.keywords:
            error(call, f"a dtype variable is declared as `{name} = tile.dtype_var(\"{name}\", dtypes...)`",
                  "its first argument is its own name, then the dtypes it may take")
            continue
        dtypes = []
        for arg in call.args[1:]:
            dtype = dtype_name(arg, source.namespace)
            if dtype is None:
                error(arg, f"`{ast.unparse(arg)}` is not a tile element type ({', '.join(TILE_DTYPES)})",
                      "import dtypes from buildtile.types")
            elif dtype in dtypes:
                error(arg, f"`{dtype}` is listed twice for `{name}`")
            else:
                dtypes.append(dtype)
        found[name] = DtypeVar(name, tuple(dtypes), call)
    return found


def used_dtype_vars(source: KernelSource, dtype_vars: dict[str, DtypeVar]) -> list[str]:
    """The dtype variables a kernel's parameter annotations name, in declaration order."""
    used = set()
    for a in source.node.args.args:
        if a.annotation is not None:
            used |= {n.id for n in ast.walk(a.annotation) if isinstance(n, ast.Name) and n.id in dtype_vars}
    return [name for name in dtype_vars if name in used]


def bound_source(source: KernelSource, dtypes: tuple[tuple[str, str], ...]) -> KernelSource:
    """``source`` with each dtype variable standing for its bound dtype (a namespace entry)."""
    if not dtypes:
        return source
    namespace = dict(source.namespace)
    for var, dtype in dtypes:
        namespace[var] = f"{TYPES_MODULE}.{'bool_' if dtype == 'bool' else dtype}"
    return replace(source, namespace=namespace)
