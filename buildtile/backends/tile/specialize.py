"""Which tile shapes a kernel is compiled for: ``@tile.kernel(specialize=[...])``.

Read statically from the decorator's AST, like SIMT launch contracts. Each
specialization gives every ``tile.Out`` parameter a tile shape; a kernel
without ``specialize=`` gets :data:`buildtile.tile.DEFAULT_TILE_SHAPES`.
``requires=[...]`` relations become the manifest contract's ``requires``.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from buildtile.backend import KernelSource
from buildtile.backends.common.constants import fold_constant, module_constants
from buildtile.backends.common.contract import parse_contract
from buildtile.backends.tile.params import out_params, parse_param_type
from buildtile.backends.tile.shapes import MAX_TILE_ELEMENTS
from buildtile.backends.tile.types import is_pow2, param_facts
from buildtile.diagnostics import Diagnostic, Span
from buildtile.interop.abi import mangle
from buildtile.tile import DEFAULT_TILE_SHAPES

DECORATOR_KEYS = ("specialize", "requires")


@dataclass(frozen=True)
class Specialization:
    """One compiled tile shape of a kernel: every ``tile.Out`` parameter's tile shape."""

    tile_shapes: tuple[tuple[str, tuple[int, ...]], ...]    # (out parameter, shape), in parameter order
    symbol: str

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return dict(self.tile_shapes)

    def describe(self) -> str:
        return ", ".join(f"{name}: {list(shape)}" for name, shape in self.tile_shapes)


def symbol_for(module: str, name: str, tile_shapes) -> str:
    """``pkg_tiles__add__t128``; ``__t64x64``; several outputs: ``__t64x64_64x64``."""
    suffix = "_".join("x".join(map(str, shape)) for _, shape in tile_shapes)
    return f"{mangle(module, name)}__t{suffix}"


def parse_decorator(source: KernelSource) -> tuple[list[Specialization], dict, list[Diagnostic]]:
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
    outs = out_params(source.node, source.namespace)
    consts = module_constants(source.module_ast)
    specs: list[Specialization] = []
    if "specialize" in keywords:
        specs = _explicit(keywords["specialize"], outs, consts, source, error)
    elif outs:
        shapes = tuple((name, DEFAULT_TILE_SHAPES[rank]) for name, rank in outs)
        specs = [Specialization(shapes, symbol_for(source.module, source.name, shapes))]
    contract = {"block": None, "index_dims": 0, "min_blocks": None, "dynamic_shared": 0,
                "min_compute_capability": None, "requires": []}
    if "requires" in keywords:
        params = {}
        for a in source.node.args.args:
            ty, _ = parse_param_type(a.annotation, source.namespace)
            if ty is not None:
                params[a.arg] = param_facts(ty)
        call = ast.Call(func=deco.func, args=[], keywords=[ast.keyword(arg="requires", value=keywords["requires"])])
        ast.copy_location(call, deco)
        parsed, contract_diags = parse_contract(call, params, consts, source.display_file, source.lines)
        contract["requires"] = parsed["requires"]
        diags += contract_diags
    return specs, contract, diags


def _explicit(node: ast.AST, outs: list[tuple[str, int]], consts: dict, source: KernelSource, error) -> list[Specialization]:
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        error(node, "`specialize` is a non-empty list of dicts, one per specialization",
              'e.g. specialize=[{"z": [128]}, {"z": [1024]}]')
        return []
    names = [name for name, _ in outs]
    ranks = dict(outs)
    specs, seen = [], set()
    for item in node.elts:
        if not isinstance(item, ast.Dict):
            error(item, "each specialization is a dict from tile.Out parameter to tile shape", 'e.g. {"z": [128]}')
            continue
        shapes: dict[str, tuple[int, ...]] = {}
        ok = True
        for key, value in zip(item.keys, item.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                error(key or item, "the keys of a specialization are parameter names, as strings")
                ok = False
                continue
            if key.value in _unparsed_params(source):
                ok = False      # its parameter's own diagnostic says what is wrong with its type
                continue
            if key.value not in ranks:
                error(key, f"`{key.value}` is not a tile.Out parameter of `{source.name}`",
                      f"tile.Out parameters: {', '.join(names) or 'none'}")
                ok = False
                continue
            shape = _shape(value, ranks[key.value], consts, error)
            if shape is None:
                ok = False
            else:
                shapes[key.value] = shape
        missing = [n for n in names if n not in shapes]
        if ok and missing:
            error(item, f"this specialization gives no tile shape for {', '.join(f'`{n}`' for n in missing)}",
                  "every tile.Out parameter needs a tile shape")
            ok = False
        if not ok:
            continue
        tile_shapes = tuple((n, shapes[n]) for n in names)
        if tile_shapes in seen:
            error(item, "this specialization is listed twice")
            continue
        seen.add(tile_shapes)
        specs.append(Specialization(tile_shapes, symbol_for(source.module, source.name, tile_shapes)))
    return specs


def _shape(node: ast.AST, rank: int, consts: dict, error) -> tuple[int, ...] | None:
    items = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
    values = [fold_constant(i, consts) for i in items]
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
    if math.prod(values) > MAX_TILE_ELEMENTS:
        error(node, f"a tile of {values} has more than {MAX_TILE_ELEMENTS} elements",
              "one block holds its tile in registers; use smaller tiles")
        return None
    return tuple(values)


def _unparsed_params(source: KernelSource) -> set[str]:
    """Parameters whose annotation is no tile kernel type (each reported where the kernel is typed)."""
    return {a.arg for a in source.node.args.args if parse_param_type(a.annotation, source.namespace)[0] is None}
