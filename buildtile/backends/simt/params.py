"""The parameters of SIMT kernels and device functions: their annotations, read as IR types."""

from __future__ import annotations

import ast

from buildtile.backends.simt.spellings import foreign_type_help
from buildtile.backends.simt.types import BOOL, COMPLEX, SCALARS, Scalar, SharedT, SliceT, TensorT
from buildtile.discovery import resolve_dotted

SIMT_MODULE = "buildtile.simt"
TYPES_MODULE = "buildtile.types"

_PARAM_KINDS = {
    "Slice": ("slice", "read"),
    "DisjointSlice": ("slice", "disjoint"),
    "AtomicSlice": ("slice", "atomic"),
    "Tensor": ("tensor", "read"),
    "DisjointTensor": ("tensor", "disjoint"),
    "SharedArray": ("shared", "shared"),
}


def parse_param_type(annotation: ast.AST | None, namespace: dict[str, str], records: dict[str, Scalar] | None = None):
    """The IR type of a parameter annotation, or a message saying why not; ``records`` are
    the module's record types, by name, which arrays may have as elements."""
    if annotation is None:
        return None, "parameter has no type annotation"
    if isinstance(annotation, ast.Subscript):
        kind = resolve_dotted(annotation.value, namespace)
        short = kind.rsplit(".", 1)[-1] if kind and kind.startswith(TYPES_MODULE + ".") else None
        if short not in _PARAM_KINDS:
            return None, (foreign_type_help(annotation.value, namespace)
                          or f"`{ast.unparse(annotation.value)}` is not a buildtile parameter kind")
        family, access = _PARAM_KINDS[short]
        args = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        elem = scalar_of(args[0], namespace)
        if elem is None and records and isinstance(args[0], ast.Name) and args[0].id in records:
            if access == "atomic":
                return None, "atomics take scalar elements, not records"
            elem = records[args[0].id]
        if elem is None:
            return None, foreign_type_help(args[0], namespace) or f"`{ast.unparse(args[0])}` is not a scalar type"
        if family == "slice":
            if len(args) != 1:
                return None, f"`{short}` takes one argument: the element type"
            return SliceT(elem, access), None
        if family == "shared":
            if len(args) == 1:
                return SharedT(elem, 0, rank=1, view=True), None
            if len(args) != 2 or not (isinstance(args[1], ast.Constant) and args[1].value in (1, 2, 3)):
                return None, "`SharedArray` takes an element type and, optionally, a rank of 1, 2 or 3"
            return SharedT(elem, 0, rank=args[1].value, view=True), None
        if len(args) != 2 or not (isinstance(args[1], ast.Constant) and args[1].value in (1, 2, 3)):
            return None, f"`{short}` takes an element type and a rank of 1, 2 or 3"
        return TensorT(elem, args[1].value, access), None
    scalar = scalar_of(annotation, namespace)
    if scalar is None:
        return None, foreign_type_help(annotation, namespace) or f"`{ast.unparse(annotation)}` is not a buildtile type"
    return scalar, None


def scalar_of(node: ast.AST, namespace: dict[str, str]) -> Scalar | None:
    """The scalar type an annotation names, or None."""
    if isinstance(node, ast.Name) and node.id == "bool" and "bool" not in namespace:
        return BOOL   # the builtin name reads naturally in annotations
    name = resolve_dotted(node, namespace)
    if name and name.startswith(TYPES_MODULE + "."):
        short = name.rsplit(".", 1)[-1]
        return SCALARS.get(short) or COMPLEX.get(short)
    return None
