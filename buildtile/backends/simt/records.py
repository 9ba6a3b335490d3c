"""Record element types in SIMT kernels: ``@simt.record`` classes of scalar fields.

A record is declared at module level and found statically, as kernels are (the compiler
never imports user code)::

    @simt.record
    class Particle:
        x: f32
        vx: f32
        mass: f64

Its layout is the one a C compiler gives the struct of those fields (``record_of``).
Kernels read a field of an element (``p[i].x``), write one (``out[i].x = v``) and copy a
whole element (``out[i] = p[i]``); a record value is never held in a name nor computed
with. :class:`RecordAccess` is part of the SIMT typer.
"""

from __future__ import annotations

import ast

from buildtile.backends.common.typer import BaseTyper
from buildtile.backends.common.types import Record, record_of
from buildtile.backends.simt import ir
from buildtile.backends.simt.params import SIMT_MODULE, scalar_of
from buildtile.backends.simt.types import COMPLEX, SCALARS, Scalar, SliceT, TensorT
from buildtile.diagnostics import Diagnostic, Span
from buildtile.discovery import resolve_dotted
from buildtile.interop.c_model import PACKAGE_FUNCTIONS

_FIELD_HELP = "a record field is one scalar (f32, i64, complex64, ...); records do not nest and hold no arrays"


def is_record(ty) -> bool:
    return isinstance(ty, Record)


def layout_record(rec: Record, module: str) -> dict:
    """A record's layout as the manifest's ``records`` holds it (interop/record_layout.py)."""
    return {"module": module, "size": rec.size, "align": rec.align,
            "fields": [{"name": name, "dtype": ty.name, "offset": offset} for name, ty, offset in rec.fields]}


def record_classes(module_ast: ast.Module, namespace: dict[str, str]) -> list[ast.ClassDef]:
    """The module's ``@simt.record`` classes."""
    return [stmt for stmt in module_ast.body if isinstance(stmt, ast.ClassDef)
            and any(resolve_dotted(d, namespace) == SIMT_MODULE + ".record" for d in stmt.decorator_list)]


def module_records(module_ast: ast.Module, namespace: dict[str, str], display_file: str,
                   lines: list[str]) -> tuple[dict[str, Record], list[Diagnostic]]:
    """Every record the module declares, by class name, and what is wrong with any."""
    records: dict[str, Record] = {}
    diags: list[Diagnostic] = []

    def refuse(node: ast.AST, message: str, label: str = "", help: str = _FIELD_HELP) -> None:
        diags.append(Diagnostic("BT0308", message, Span.of(node, display_file, lines), label=label, help=help))

    classes = record_classes(module_ast, namespace)
    names = {c.name for c in classes}
    for cls in classes:
        fields: list[tuple[str, Scalar]] = []
        ok = True
        for stmt in cls.body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                continue   # a docstring
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                refuse(stmt, f"record `{cls.name}` may only declare fields",
                       help="write one `name: type` line per field; records have no methods or values")
                ok = False
                continue
            if stmt.value is not None:
                refuse(stmt.value, f"field `{cls.name}.{stmt.target.id}` cannot have a default",
                       help="a record is laid out in memory; its fields have no defaults")
                ok = False
            ty = scalar_of(stmt.annotation, namespace)
            if ty is None:
                ann = stmt.annotation
                nested = isinstance(ann, ast.Name) and ann.id in names
                label = ("records do not nest" if nested else
                         "arrays are not record fields" if isinstance(ann, ast.Subscript) else "not a scalar type")
                refuse(ann, f"field `{cls.name}.{stmt.target.id}` has type `{ast.unparse(ann)}`, "
                       "which is not a scalar type", label=label,
                       help=_FIELD_HELP + ("; put the inner record's fields in this one" if nested else ""))
                ok = False
                continue
            if any(f == stmt.target.id for f, _ in fields):
                refuse(stmt.target, f"field `{cls.name}.{stmt.target.id}` is declared twice")
                ok = False
            fields.append((stmt.target.id, ty))
        if cls.name in SCALARS or cls.name in COMPLEX:
            refuse(cls, f"record `{cls.name}` has the name of a scalar type",
                   help="the manifest and the C header name element types by name; rename the record")
            ok = False
        # a name C cannot carry fails the build, but the record is still a type for the kernels' checks
        for name, node in [(cls.name, cls), *((f, stmt.target) for f, stmt in _field_statements(cls))]:
            why = _unusable_in_c(name, node is cls)
            if why:
                diags.append(Diagnostic("BT0431", f"{'record' if node is cls else 'field'} `{name}` {why}",
                                        Span.of(node, display_file, lines), label="named here",
                                        help="the C header declares each record as a struct of its fields: "
                                             "rename it"))
        if ok and not fields:
            refuse(cls, f"record `{cls.name}` has no fields", help="declare its fields: `x: f32`")
            ok = False
        if ok:
            records[cls.name] = record_of(cls.name, fields)
    return records, diags


def _field_statements(cls: ast.ClassDef) -> list[tuple[str, ast.AnnAssign]]:
    return [(stmt.target.id, stmt) for stmt in cls.body
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)]


def _unusable_in_c(name: str, is_record: bool) -> str | None:
    """Why the C header cannot name a record (``<package>_<name>``) or a field ``name``; None if it can."""
    if not name.isascii():
        return "has a name that is not an ASCII identifier"
    if is_record and name in PACKAGE_FUNCTIONS:
        return f"would be the C struct `<package>_{name}`, the name of a function of the package's library"
    return None


def reports_declarations(module_ast: ast.Module, namespace: dict[str, str], kernel: ast.FunctionDef) -> bool:
    """Whether ``kernel`` is the module's first SIMT kernel, the one whose check reports what
    is wrong with the module's record declarations (once, however many kernels there are)."""
    first = next((stmt for stmt in module_ast.body if isinstance(stmt, ast.FunctionDef) and any(
        resolve_dotted(d.func if isinstance(d, ast.Call) else d, namespace) == SIMT_MODULE + ".kernel"
        for d in stmt.decorator_list)), None)
    return first is kernel


class RecordAccess(BaseTyper):
    """Fields and whole elements of record arrays, in the SIMT typer."""

    def record_field_load(self, node: ast.Attribute) -> ir.Expr | None:
        """``p[i].x``: a field of a record element, or None when ``node`` is no such read."""
        base = node.value
        if not (isinstance(base, ast.Subscript) and isinstance(base.value, ast.Name)):
            return None
        param = self.params.get(base.value.id)
        if param is None or base.value.id in self.locals or not isinstance(param.ty, (SliceT, TensorT)):
            return None
        if not is_record(param.ty.elem):
            if param.ty.elem.kind == "complex":
                return None   # `.real`, `.imag`: the complex numbers' own
            self.fail("BT0425", node, f"`{ast.unparse(base)}` is an {param.ty.elem}, which has no fields",
                      help="fields belong to the elements of record arrays, e.g. `Slice[Particle]` "
                           "of a `@simt.record class Particle`")
        param, indices, rec = self.record_element(node.value)
        ty = self.field_type(rec, node)
        return ir.FieldLoad(ty, param=param.name, indices=indices, field=node.attr, src=node)

    def record_field_store(self, target: ast.Attribute, value_node: ast.AST, node: ast.stmt) -> ir.Stmt:
        """``out[i].x = v``: one field of this thread's own element."""
        if not isinstance(target.value, ast.Subscript):
            self.fail("BT0200", target, "cannot assign to this expression",
                      help="write a field of an array element: `out[i].x = v`")
        param, indices, rec = self.record_element(target.value)
        ty = self.field_type(rec, target)
        value = self.coerce(self.expr(value_node), ty, value_node)
        return ir.FieldStore(param=param.name, indices=indices, value=value, field=target.attr, src=target.value)

    def cast(self, value: ir.Expr, target: Scalar, node: ast.Call) -> ir.Expr:
        if is_record(value.ty):
            self.type_mismatch(node.args[0], "a cast", "a scalar", value.ty,
                               help=f"cast one of its fields, e.g. `{ast.unparse(node.func)}"
                                    f"({ast.unparse(node.args[0])}.{value.ty.fields[0][0]})`")
        return super().cast(value, target, node)

    def record_element(self, node: ast.Subscript):
        param, indices = self.subscript_parts(node)
        rec = param.ty.elem
        if not is_record(rec):
            self.fail("BT0425", node, f"`{param.name}` has elements of type {rec}, which have no fields",
                      help="fields belong to the elements of record arrays: `Slice[Particle]`")
        return param, indices, rec

    def field_type(self, rec: Record, node: ast.Attribute) -> Scalar:
        found = rec.field(node.attr)
        if found is None:
            self.fail("BT0425", node, f"record `{rec.name}` has no field `{node.attr}`",
                      help=f"its fields are {', '.join(f'`{name}`' for name, _, _ in rec.fields)}")
        return found[0]


