"""Which tile shapes and dtypes a kernel is compiled for: ``@tile.kernel(specialize=...)``.

Read statically from the decorator's AST, like SIMT launch contracts.
``specialize`` is a list of dicts (one per specialization, giving every
``tile.Out`` parameter's tile shape and optionally a dtype variable's dtype),
a ``tile.product`` of value lists, a module constant holding either, or the
name of a product declared in pyproject (see ``products``). A kernel without
``specialize=`` gets :data:`buildtile.tile.DEFAULT_TILE_SHAPES`. A kernel
generic over dtype variables (``dtype_vars``) is compiled once per dtype:
the variables a specialization does not bind take every dtype they declare.
``requires=[...]`` relations become the manifest contract's ``requires``.

Explicitly listed specializations are refused when invalid (BT0600); a
product's combinations whose tile is too large are dropped (see ``products``).
"""

from __future__ import annotations

import ast
import itertools
import math
from dataclasses import dataclass

from buildtile.backend import CompileOptions, KernelSource
from buildtile.backends.common.contract import parse_contract
from buildtile.backends.tile.dtype_vars import DtypeVar, bound_source, dtype_name, module_dtype_vars, used_dtype_vars
from buildtile.backends.tile.params import TILE_MODULE, out_params, parse_param_type
from buildtile.backends.tile.products import (
    ProductDecl,
    fold,
    module_assignment,
    parse_product_call,
    pyproject_product,
    shape_constants,
)
from buildtile.backends.tile.shapes import MAX_OUT_TILE_ELEMENTS, MAX_TILE_ELEMENTS
from buildtile.backends.tile.types import is_pow2, param_facts
from buildtile.diagnostics import Diagnostic, Span
from buildtile.discovery import resolve_dotted
from buildtile.interop.abi import mangle
from buildtile.tile import DEFAULT_TILE_SHAPES

DECORATOR_KEYS = ("specialize", "requires")


@dataclass(frozen=True)
class Specialization:
    """One compiled tile shape of a kernel: every ``tile.Out`` parameter's tile shape."""

    tile_shapes: tuple[tuple[str, tuple[int, ...]], ...]    # (out parameter, shape), in parameter order
    symbol: str
    dtypes: tuple[tuple[str, str], ...] = ()                # (dtype variable, dtype), in declaration order

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return dict(self.tile_shapes)

    def describe(self) -> str:
        return ", ".join([f"{name}: {list(shape)}" for name, shape in self.tile_shapes]
                         + [f"{var} = {dtype}" for var, dtype in self.dtypes])


def symbol_for(module: str, name: str, tile_shapes, dtypes=(), defaults=()) -> str:
    """``pkg_tiles__add__t128``; ``__t64x64``; several outputs: ``__t64x64_64x64``.

    A generic kernel's specialization appends its dtypes (``__t128_bf16``), except where every
    dtype variable is at its default (``defaults``, the first dtype each declares): that one
    keeps the symbol the kernel had before it was generic. Shape parts are digits and ``x``,
    dtype names start with a letter, so the suffix stays injective.
    """
    suffix = "_".join("x".join(map(str, shape)) for _, shape in tile_shapes)
    if dtypes and tuple(d for _, d in dtypes) != tuple(defaults):
        suffix += "".join(f"_{d}" for _, d in dtypes)
    return f"{mangle(module, name)}__t{suffix}"


def parse_decorator(source: KernelSource, options: CompileOptions | None = None
                    ) -> tuple[list[Specialization], dict, list[Diagnostic]]:
    """The kernel's specializations, its manifest contract record, and any diagnostics."""
    deco = source.decorator
    diags: list[Diagnostic] = []

    def error(node, message, help=""):
        diags.append(Diagnostic("BT0600", f"invalid tile kernel declaration: {message}",
                                Span.of(node, source.display_file, source.lines), help=help))

    keywords = {}
    if isinstance(deco, ast.Call):
        for pos in deco.args:
            error(pos, "`@tile.kernel` takes keyword arguments only",
                  'write `@tile.kernel(specialize=[{"z": [128]}])`')
        for kw in deco.keywords:
            if kw.arg not in DECORATOR_KEYS:
                error(kw.value if kw.arg else deco, f"unknown key `{kw.arg}`",
                      f"known keys: {', '.join(DECORATOR_KEYS)}; tile kernels have no block: the compiler picks "
                      "the threads")
            else:
                keywords[kw.arg] = kw.value
    declared = module_dtype_vars(source, error)
    generic = [declared[name] for name in used_dtype_vars(source, declared)]
    defaults = tuple(v.dtypes[0] if v.dtypes else "" for v in generic)
    typing_source = bound_source(source, tuple((v.name, d) for v, d in zip(generic, defaults) if d))
    outs = out_params(typing_source.node, typing_source.namespace)
    consts = shape_constants(source.module_ast, source.namespace)
    declaration = _Declaration(source, outs, generic, defaults, consts, error,
                               options.tile_specialize if options is not None else "")
    specs: list[Specialization] = []
    if "specialize" in keywords:
        specs = declaration.read(keywords["specialize"])
    elif outs:
        specs = declaration.expand(ProductDecl(shape=None), source.node)
    contract = {"block": None, "index_dims": 0, "min_blocks": None, "dynamic_shared": 0,
                "min_compute_capability": None, "requires": []}
    if "requires" in keywords:
        params = {}
        for a in source.node.args.args:
            ty, _ = parse_param_type(a.annotation, typing_source.namespace)
            if ty is not None:
                params[a.arg] = param_facts(ty)
        call = ast.Call(func=deco.func, args=[], keywords=[ast.keyword(arg="requires", value=keywords["requires"])])
        ast.copy_location(call, deco)
        parsed, contract_diags = parse_contract(call, params, consts, source.display_file, source.lines)
        contract["requires"] = parsed["requires"]
        diags += contract_diags
    return specs, contract, diags


class _Declaration:
    """Reads one kernel's ``specialize=`` value into its specializations."""

    def __init__(self, source: KernelSource, outs: list[tuple[str, int]], generic: list[DtypeVar],
                 defaults: tuple[str, ...], consts: dict, error, settings_json: str = "") -> None:
        self.source, self.outs, self.generic, self.defaults = source, outs, generic, defaults
        self.consts, self.error, self.settings_json = consts, error, settings_json
        self.names = [name for name, _ in outs]
        self.ranks = dict(outs)

    def read(self, node: ast.AST, *, through: str | None = None) -> list[Specialization]:
        ns = self.source.namespace
        if isinstance(node, (ast.List, ast.Tuple)):
            return self.explicit(node)
        if isinstance(node, ast.Call) and resolve_dotted(node.func, ns) == TILE_MODULE + ".product":
            decl = parse_product_call(node, self.consts, ns, self.error)
            return [] if decl is None else self.expand(decl, node)
        if isinstance(node, ast.Name) and through is None and node.id not in ns:
            value = module_assignment(self.source.module_ast, node.id)
            if value is None:
                self.error(node, f"`{node.id}` is not a module-level specialization list or `tile.product`",
                           f"declare it at module level: `{node.id} = tile.product(...)`")
                return []
            return self.read(value, through=node.id)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and through is None:
            decl, problem, declared = pyproject_product(node.value, self.source.file, self.settings_json)
            if decl is None:
                self.error(node, problem, f"declared there: {', '.join(declared)}" if declared else
                           f'declare it: [tool.buildtile.tile.specialize.{node.value}] with shape = [...] '
                           "and value lists")
                return []
            return self.expand(decl, node)
        self.error(node, "`specialize` is a list of dicts (one per specialization), a `tile.product(...)`, "
                         "a module constant holding one, or the name of a product in pyproject",
                   'e.g. specialize=[{"z": [128]}, {"z": [1024]}] or '
                   'specialize=tile.product(shape=("cols",), cols=[128, 1024])')
        return []

    # ------------------------------------------------------------------ dtypes

    def dtype_choices(self, given: dict[str, list[str]], node: ast.AST, where: str,
                      nodes: dict[str, ast.AST] | None = None) -> list[tuple] | None:
        """Every binding of the kernel's dtype variables: ``given`` lists, else each one's declared dtypes."""
        lists = []
        for var in self.generic:
            if var.name in given:
                extra = [d for d in given[var.name] if var.dtypes and d not in var.dtypes]
                if extra:
                    self.error((nodes or {}).get(var.name, node), f"{where}`{var.name}` takes {', '.join(var.dtypes)}; "
                                     f"{', '.join(extra)} is not one of them",
                               f"add it to `tile.dtype_var(\"{var.name}\", ...)` or drop it here")
                    return None
                lists.append(given[var.name])
            elif var.dtypes:
                lists.append(list(var.dtypes))
            else:
                self.error(node, f"dtype variable `{var.name}` of `{self.source.name}` is bound to no dtype",
                           f"list its dtypes in `tile.dtype_var(\"{var.name}\", f16, ...)` or in the "
                           f"specialization (`{var.name}=[f16, f32]`)")
                return None
        return [tuple(zip((v.name for v in self.generic), combo)) for combo in itertools.product(*lists)]

    def spec(self, tile_shapes: tuple, dtypes: tuple) -> Specialization:
        defaults = self.defaults if all(self.defaults) else ()
        return Specialization(tile_shapes, symbol_for(self.source.module, self.source.name, tile_shapes,
                                                      dtypes, defaults), dtypes)

    # ------------------------------------------------------------------ products

    def expand(self, decl: ProductDecl, node: ast.AST) -> list[Specialization]:
        where = f"in `{decl.where}`, " if decl.where else ""
        given = {name: decl.values[name] for name in decl.dtype_lists}
        sizes = {name: values for name, values in decl.values.items() if name not in decl.dtype_lists}
        templates = self.templates(decl, node, where)
        if templates is None:
            return []
        used = {e for t in templates.values() for e in t if isinstance(e, str)}
        for name in sorted(used - set(sizes)):
            self.error(decl.nodes.get("shape", node), f"{where}the tile shape names `{name}`, which the product does not list",
                       f"add a value list: {name}=[...]")
            return []
        for name in sorted(set(sizes) - used):
            self.error(decl.nodes.get(name, node), f"{where}`{name}` is listed but no tile shape uses it",
                       f"use it in shape=(...) or drop it; the names of the shape: {', '.join(sorted(used)) or 'none'}")
            return []
        for name in sorted(used):
            bad = [v for v in sizes[name] if not is_pow2(v)]
            if bad:
                self.error(decl.nodes.get(name, node), f"{where}`{name}` lists {bad[0]}, which is not a power of two",
                           "tile extents are powers of two (ragged edges of the array are masked); "
                           "`tile.next_power_of_2(n)` rounds up")
                return []
        for value in (e for t in templates.values() for e in t if isinstance(e, int)):
            if not is_pow2(value):
                self.error(node, f"{where}the tile shape holds {value}, which is not a power of two")
                return []
        choices = self.dtype_choices(given, node, where, decl.nodes)
        if choices is None:
            return []
        names = sorted(used, key=list(sizes).index)
        specs, seen, dropped = [], set(), []
        for combo in itertools.product(*(sizes[n] for n in names)):
            env = dict(zip(names, combo))
            tile_shapes = tuple((out, tuple(env[e] if isinstance(e, str) else e for e in templates[out]))
                                for out in self.names)
            limit = min(MAX_OUT_TILE_ELEMENTS, decl.max_elements or MAX_TILE_ELEMENTS)
            too_big = [shape for _, shape in tile_shapes if math.prod(shape) > limit]
            if too_big:
                dropped.append(too_big[0])
                continue
            for dtypes in choices:
                if (tile_shapes, dtypes) not in seen:
                    seen.add((tile_shapes, dtypes))
                    specs.append(self.spec(tile_shapes, dtypes))
        if not specs and self.names:
            limit = min(MAX_OUT_TILE_ELEMENTS, decl.max_elements or MAX_TILE_ELEMENTS)
            self.error(node, f"{where}every combination of the product is a tile of more than "
                             f"{limit} elements (e.g. {list(dropped[0])})",
                       "one block holds its tile in registers; list smaller extents")
        return specs

    def templates(self, decl: ProductDecl, node: ast.AST, where: str) -> dict[str, tuple] | None:
        """Each tile.Out parameter's shape template."""
        if decl.shape is None:
            return {out: DEFAULT_TILE_SHAPES[rank] for out, rank in self.outs}
        if isinstance(decl.shape, tuple):
            templates = {out: decl.shape for out in self.names}
        else:
            unknown = [k for k in decl.shape if k not in self.ranks]
            if unknown:
                self.error(node, f"{where}`{unknown[0]}` is not a tile.Out parameter of `{self.source.name}`",
                           f"tile.Out parameters: {', '.join(self.names) or 'none'}; a tuple shape "
                           "gives every one the same")
                return None
            missing = [n for n in self.names if n not in decl.shape]
            if missing:
                self.error(node, f"{where}the product gives no tile shape for "
                                 f"{', '.join(f'`{n}`' for n in missing)}",
                           "every tile.Out parameter needs a tile shape")
                return None
            templates = dict(decl.shape)
        for out, template in templates.items():
            if len(template) != self.ranks[out]:
                rank = self.ranks[out]
                self.error(node, f"{where}a tile shape of a rank-{rank} output has {rank} "
                                 f"extent{'s' if rank > 1 else ''}, not {len(template)} "
                                 f"(`{out}`: {list(template)})")
                return None
        return templates

    # ------------------------------------------------------------------ explicit lists

    def explicit(self, node: ast.AST) -> list[Specialization]:
        error = self.error
        if not node.elts:
            error(node, "`specialize` is a non-empty list of dicts, one per specialization",
                  'e.g. specialize=[{"z": [128]}, {"z": [1024]}]')
            return []
        generic = {v.name for v in self.generic}
        specs, seen = [], set()
        for item in node.elts:
            if not isinstance(item, ast.Dict):
                error(item, "each specialization is a dict from tile.Out parameter to tile shape", 'e.g. {"z": [128]}')
                continue
            shapes: dict[str, tuple[int, ...]] = {}
            given: dict[str, list[str]] = {}
            ok = True
            for key, value in zip(item.keys, item.values):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    error(key or item, "the keys of a specialization are parameter names, as strings")
                    ok = False
                    continue
                if key.value in generic:
                    dtype = dtype_name(value, self.source.namespace)
                    if dtype is None:
                        error(value, f"`{ast.unparse(value)}` is not a tile element type for `{key.value}`")
                        ok = False
                    else:
                        given[key.value] = [dtype]
                    continue
                if key.value not in self.ranks and key.value in _unparsed_params(self.source):
                    ok = False      # its parameter's own diagnostic says what is wrong with its type
                    continue
                if key.value not in self.ranks:
                    error(key, f"`{key.value}` is not a tile.Out parameter of `{self.source.name}`",
                          f"tile.Out parameters: {', '.join(self.names) or 'none'}")
                    ok = False
                    continue
                shape = _shape(value, self.ranks[key.value], self.consts, self.source.namespace, error)
                if shape is None:
                    ok = False
                else:
                    shapes[key.value] = shape
            missing = [n for n in self.names if n not in shapes]
            if ok and missing:
                error(item, f"this specialization gives no tile shape for {', '.join(f'`{n}`' for n in missing)}",
                      "every tile.Out parameter needs a tile shape")
                ok = False
            choices = self.dtype_choices(given, item, "") if ok else None
            if choices is None:
                continue
            tile_shapes = tuple((n, shapes[n]) for n in self.names)
            for dtypes in choices:
                if (tile_shapes, dtypes) in seen:
                    error(item, "this specialization is listed twice")
                    continue
                seen.add((tile_shapes, dtypes))
                specs.append(self.spec(tile_shapes, dtypes))
        return specs


def _shape(node: ast.AST, rank: int, consts: dict, namespace: dict[str, str], error) -> tuple[int, ...] | None:
    items = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
    values = [fold(i, consts, namespace) for i in items]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        error(node, f"`{ast.unparse(node)}` is not a list of constant integers")
        return None
    if len(values) != rank:
        error(node, f"a tile shape of a rank-{rank} output has {rank} extent{'s' if rank > 1 else ''}, "
                    f"not {len(values)}")
        return None
    if not all(is_pow2(v) for v in values):
        error(node, f"tile shape {values} has an extent that is not a power of two",
              "tile extents are powers of two (ragged edges of the array are masked)")
        return None
    if math.prod(values) > MAX_OUT_TILE_ELEMENTS:
        error(node, f"a tile of {values} has more than {MAX_OUT_TILE_ELEMENTS} elements",
              f"a block holds at most {MAX_TILE_ELEMENTS} elements at once and writes a longer tile in chunks; "
              "use smaller tiles")
        return None
    return tuple(values)


def _unparsed_params(source: KernelSource) -> set[str]:
    """Parameters whose annotation is no tile kernel type (each reported where the kernel is typed)."""
    return {a.arg for a in source.node.args.args if parse_param_type(a.annotation, source.namespace)[0] is None}
