"""Specializations as products of value lists, declared in source or in pyproject.

    @tile.kernel(specialize=tile.product(shape=("rows", "cols"), rows=[1, 4], cols=[256, 1024]))
    ROW_TILES = tile.product(shape=("rows", "cols"), rows=[1, 4], cols=[256, 1024], T=[f16, f32])
    @tile.kernel(specialize=ROW_TILES)              # a module constant, shared by kernels
    @tile.kernel(specialize="rows")                 # [tool.buildtile.tile.specialize.rows]

``shape`` gives every ``tile.Out`` parameter's tile shape in terms of the
names (a tuple for all of them, or a dict per parameter); each entry is a
name or a constant. A list of dtypes binds the dtype variable of that name.
Everything is read statically; constants may use ``tile.next_power_of_2``
and ``tile.cdiv``. Combinations whose tile holds more elements than one
block can keep (``MAX_TILE_ELEMENTS``), or than the product's
``max_elements``, are dropped, not refused: a product states a family, and
its corners need not all exist. A product none of whose combinations is
kept is refused.
"""

from __future__ import annotations

import ast
import copy
import json
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from buildtile.backends.common.constants import fold_constant, module_constants
from buildtile.backends.tile.dtype_vars import dtype_name
from buildtile.backends.tile.params import TILE_MODULE
from buildtile.config import PYPROJECT_MAX_ELEMENTS_KEY, SHAPE_KEY, product_table_problem
from buildtile.discovery import resolve_dotted

#: the keyword of ``tile.product`` that is the largest tile kept (``max-elements`` in pyproject)
MAX_ELEMENTS_KEY = "max_elements"
#: where pyproject declares products
PYPROJECT_TABLE = "tool.buildtile.tile.specialize"


@dataclass
class ProductDecl:
    """A product as declared, before it meets a kernel: names, value lists and the shape template."""

    shape: tuple | dict | None            # entries: int or a value-list name; None: default tile shapes
    values: dict[str, list] = field(default_factory=dict)   # name -> ints, or dtype names
    dtype_lists: set[str] = field(default_factory=set)       # the names whose values are dtypes
    where: str = ""                       # a pyproject key, for messages; "" in source
    max_elements: int | None = None       # combinations with a larger tile are dropped
    nodes: dict[str, ast.AST] = field(default_factory=dict)  # in source: each keyword's value, for spans


# ----------------------------------------------------------------------------- constants

_FOLDED_CALLS = {"next_power_of_2": lambda n: 1 if n <= 1 else 1 << (n - 1).bit_length(),
                 "cdiv": lambda a, b: -(-a // b)}


class _FoldShapeHelpers(ast.NodeTransformer):
    def __init__(self, consts: dict, namespace: dict[str, str]) -> None:
        self.consts, self.namespace = consts, namespace

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        dotted = resolve_dotted(node.func, self.namespace) or ""
        helper = _FOLDED_CALLS.get(dotted[len(TILE_MODULE) + 1:]) if dotted.startswith(TILE_MODULE + ".") else None
        if helper is None or node.keywords:
            return node
        args = [fold_constant(a, self.consts) for a in node.args]
        if len(args) != helper.__code__.co_argcount or \
                not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            return node
        if dotted.endswith(".cdiv") and args[1] == 0:
            return node
        return ast.copy_location(ast.Constant(helper(*args)), node)


def fold(node: ast.AST, consts: dict, namespace: dict[str, str]):
    """A constant expression's value, with ``tile.next_power_of_2`` / ``tile.cdiv`` folded; else None."""
    return fold_constant(_FoldShapeHelpers(consts, namespace).visit(copy.deepcopy(node)), consts)


def shape_constants(module_ast: ast.Module, namespace: dict[str, str]) -> dict:
    """Module constants, including those computed with ``tile.next_power_of_2`` / ``tile.cdiv``."""
    consts = dict(module_constants(module_ast))
    for stmt in module_ast.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and stmt.targets[0].id not in consts:
            value = fold(stmt.value, consts, namespace)
            if isinstance(value, int) and not isinstance(value, bool):
                consts[stmt.targets[0].id] = value
    return consts


def module_assignment(module_ast: ast.Module, name: str) -> ast.AST | None:
    """The value of the last module-level ``name = value``, or None."""
    found = None
    for stmt in module_ast.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            found = stmt.value
    return found


# ----------------------------------------------------------------------------- in source

def parse_product_call(call: ast.Call, consts: dict, namespace: dict[str, str], error) -> ProductDecl | None:
    """``tile.product(shape=..., name=[values], ...)`` as a declaration; ``error(node, message, help)``."""
    ok = True
    for pos in call.args:
        error(pos, "`tile.product` takes keyword arguments only",
              'e.g. tile.product(shape=("rows", "cols"), rows=[1, 4], cols=[256, 1024])')
        ok = False
    decl = ProductDecl(shape=None)
    for kw in call.keywords:
        if kw.arg is not None:
            decl.nodes[kw.arg] = kw.value
        if kw.arg is None:
            error(kw.value, "`tile.product` takes its value lists by name, not `**`")
            ok = False
        elif kw.arg == SHAPE_KEY:
            decl.shape = _shape_template(kw.value, consts, namespace, error)
            ok = ok and decl.shape is not None
        elif kw.arg == MAX_ELEMENTS_KEY:
            limit = fold(kw.value, consts, namespace)
            if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
                error(kw.value, "`max_elements` is a positive constant integer",
                      "combinations whose tile holds more elements are dropped")
                ok = False
            decl.max_elements = limit
        else:
            values = _value_list(kw.arg, kw.value, consts, namespace, error)
            if values is None:
                ok = False
                continue
            decl.values[kw.arg] = values[1]
            if values[0]:
                decl.dtype_lists.add(kw.arg)
    return decl if ok else None


def _shape_template(node: ast.AST, consts: dict, namespace: dict[str, str], error):
    if isinstance(node, ast.Dict):
        template = {}
        for key, value in zip(node.keys, node.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                error(key or node, "the keys of `shape` are tile.Out parameter names, as strings")
                return None
            entries = _shape_entries(value, consts, namespace, error)
            if entries is None:
                return None
            template[key.value] = entries
        return template
    return _shape_entries(node, consts, namespace, error)


def _shape_entries(node: ast.AST, consts: dict, namespace: dict[str, str], error) -> tuple | None:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
    entries = []
    for item in items:
        if isinstance(item, ast.Constant) and isinstance(item.value, str):
            entries.append(item.value)
            continue
        value = fold(item, consts, namespace)
        if not isinstance(value, int) or isinstance(value, bool):
            error(item, f"`{ast.unparse(item)}` is neither a name of the product (a string) nor a constant integer",
                  'write the tile shape with the names of value lists, e.g. shape=("rows", "cols")')
            return None
        entries.append(value)
    return tuple(entries)


def _value_list(name: str, node: ast.AST, consts: dict, namespace: dict[str, str], error):
    """(is a dtype list, values) or None."""
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        error(node, f"`{name}` is a non-empty list of values", f"e.g. {name}=[256, 1024] or {name}=[f16, f32]")
        return None
    dtypes = [dtype_name(e, namespace) for e in node.elts]
    if all(dtypes):
        values: list = dtypes
    elif any(dtypes):
        error(node, f"`{name}` mixes dtypes and integers", "a value list holds tile extents or dtypes, not both")
        return None
    else:
        values = []
        for e in node.elts:
            v = fold(e, consts, namespace)
            if not isinstance(v, int) or isinstance(v, bool):
                error(e, f"`{ast.unparse(e)}` is not a constant integer or a tile element type",
                      "values are tile extents (constants, `tile.next_power_of_2(N)`) or dtypes (f16, bf16, f32...)")
                return None
            values.append(v)
    if len(set(values)) != len(values):
        error(node, f"`{name}` lists a value twice")
        return None
    return bool(all(dtypes)), values


# ----------------------------------------------------------------------------- in pyproject

@lru_cache(maxsize=32)
def _pyproject_products(path: str, mtime_ns: int) -> dict:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    return data.get("tool", {}).get("buildtile", {}).get("tile", {}).get("specialize", {})


def find_pyproject(module_file: Path) -> Path | None:
    """The nearest pyproject.toml above a kernel's module."""
    for folder in Path(module_file).resolve().parents:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def pyproject_product(name: str, module_file: Path, settings_json: str = "") -> tuple[ProductDecl | None, str | None,
                                                                                      list[str]]:
    """(the product ``name``, the problem if there is none, the names declared): from the project's
    settings (``settings_json``, what the build read) or else the nearest pyproject.toml."""
    if settings_json:
        table, where = json.loads(settings_json), "the project's settings"
    else:
        path = find_pyproject(module_file)
        if path is None:
            return None, f"no pyproject.toml above {Path(module_file).name} declares `{PYPROJECT_TABLE}.{name}`", []
        try:
            table = _pyproject_products(str(path), path.stat().st_mtime_ns)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            return None, f"cannot read {path.name}: {exc}", []
        where = path.name
    declared = sorted(table) if isinstance(table, dict) else []
    raw = table.get(name) if isinstance(table, dict) else None
    if raw is None:
        return None, f"{where} declare{'' if where.startswith('the') else 's'} no `{PYPROJECT_TABLE}.{name}`", declared
    problem = product_table_problem(raw)
    if problem:
        return None, f"`{PYPROJECT_TABLE}.{name}`: {problem}", declared
    decl = ProductDecl(shape=None, where=f"{PYPROJECT_TABLE}.{name}")
    for key, value in raw.items():
        if key == SHAPE_KEY:
            decl.shape = {k: tuple(v) for k, v in value.items()} if isinstance(value, dict) else tuple(value)
        elif key == PYPROJECT_MAX_ELEMENTS_KEY:
            decl.max_elements = value
        else:
            decl.values[key] = list(value)
            if all(isinstance(v, str) for v in value):
                decl.dtype_lists.add(key)
    return decl, None, declared
