"""The parameters of tile kernels: their annotations, read as IR types."""

from __future__ import annotations

import ast

from buildtile.backends.tile.types import MAX_RANK, SCALARS, TILE_DTYPES, ArrayT, Scalar
from buildtile.discovery import resolve_dotted

TILE_MODULE = "buildtile.tile"
TYPES_MODULE = "buildtile.types"
#: Python's scalar types, and the kernel scalar a parameter annotated with one most likely means
PYTHON_SCALARS = {"bool": "bool_", "float": "f32", "int": "i64"}


def parse_param_type(annotation: ast.AST | None, namespace: dict[str, str]):
    """The IR type of a tile kernel parameter annotation, or a message saying why not."""
    if annotation is None:
        return None, "parameter has no type annotation"
    if isinstance(annotation, ast.Subscript):
        kind = resolve_dotted(annotation.value, namespace)
        if kind not in (TYPES_MODULE + ".Tensor", TILE_MODULE + ".Out", TILE_MODULE + ".Atomic"):
            return None, (f"`{ast.unparse(annotation.value)}[...]` is not a supported tile kernel parameter type "
                          "(supported: Tensor[T, rank] inputs, tile.Out[T, rank] outputs, "
                          "tile.Atomic[T, rank] outputs and scalars)")
        short = "tile.Out" if kind.endswith(".Out") else "tile.Atomic" if kind.endswith(".Atomic") else "Tensor"
        args = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        elem = scalar_type(args[0], namespace)
        if elem is None or elem.name not in TILE_DTYPES:
            return None, (f"`{ast.unparse(args[0])}` is not a supported element type of `{short}` "
                          f"(supported: {', '.join(TILE_DTYPES)})")
        rank = args[1].value if len(args) == 2 and isinstance(args[1], ast.Constant) else None
        if not (isinstance(rank, int) and not isinstance(rank, bool) and 1 <= rank <= MAX_RANK):
            return None, f"`{short}` takes an element type and a rank of 1 to {MAX_RANK}"
        return ArrayT(elem, rank, is_out=short == "tile.Out", atomic=short == "tile.Atomic"), None
    scalar = scalar_type(annotation, namespace)
    if scalar is None:
        if isinstance(annotation, ast.Name) and annotation.id in PYTHON_SCALARS and annotation.id not in namespace:
            return None, (f"`{annotation.id}` is Python's type; a kernel's scalar is "
                          f"`{PYTHON_SCALARS[annotation.id]}` (from buildtile.types)")
        return None, (f"`{ast.unparse(annotation)}` is not a supported tile kernel parameter type "
                      "(supported: Tensor[T, rank] inputs, tile.Out[T, rank] outputs and scalars)")
    return scalar, None


def scalar_type(node: ast.AST, namespace: dict[str, str]) -> Scalar | None:
    name = resolve_dotted(node, namespace)
    if name and name.startswith(TYPES_MODULE + "."):
        return SCALARS.get(name.rsplit(".", 1)[-1])
    return None


def out_params(fn: ast.FunctionDef, namespace: dict[str, str]) -> list[tuple[str, int]]:
    """``(name, rank)`` of every ``tile.Out`` parameter, in order (for specializations)."""
    outs = []
    for a in fn.args.args:
        ty, _ = parse_param_type(a.annotation, namespace)
        if isinstance(ty, ArrayT) and ty.is_out:
            outs.append((a.arg, ty.rank))
    return outs
