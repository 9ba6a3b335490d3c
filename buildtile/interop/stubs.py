"""Type stubs for a kernel package: a ``.pyi`` beside each kernel module, and ``py.typed``.

A stub replaces its module for type checkers, so it describes the module
as users import it, whole:

- a SIMT kernel is a :class:`~buildtile.runtime.typing.SimtKernel` whose
  ``kernel[grid]`` and ``kernel.prepare(...)`` give a launch with the
  kernel's parameters, typed from the manifest (arrays take the array
  protocols, scalars ``int``/``float``/``bool``);
- a tile kernel is a :class:`~buildtile.runtime.typing.TileKernel` whose
  ``__call__`` takes the kernel's parameters;
- every other top-level statement keeps what it binds, from the module's
  AST: imports (re-exported, as the module has them), functions and
  classes by signature, variables with their annotation or the type of
  their literal. Kernel-language annotations (``f32``, ``Slice[f32]``)
  describe device code and read as ``Any``. A module that binds names in
  a way a stub cannot follow (a loop, ``try``) gets a module
  ``__getattr__``, so those names read as ``Any`` rather than vanish.

The stubs are written under ``_buildtile/stubs/`` as the package is laid
out; the wheel build puts each next to its module (:func:`wheel_files`).
A module with a ``.pyi`` of its own in the sources keeps it.
"""

from __future__ import annotations

import ast
from pathlib import Path

#: the stubs' folder inside ``_buildtile``, laid out as the package
STUBS_DIR = "stubs"
#: PEP 561's marker: the package's inline types and stubs are for type checkers to use
PY_TYPED = "py.typed"

_TYPING = "buildtile.runtime.typing"
_SCALAR_TYPES = {"bool": "bool", "f16": "float", "bf16": "float", "f32": "float", "f64": "float"}
_LITERAL_TYPES = (bool, int, float, complex, str, bytes)


# --------------------------------------------------------------------------- writing


def write_stubs(source_root: Path, manifest: dict, artifacts_dir: Path) -> list[Path]:
    """Write the stub of every kernel module of ``manifest`` (sources under ``source_root``)
    and ``py.typed`` into ``artifacts_dir/stubs``; returns the files written."""
    out = artifacts_dir / STUBS_DIR
    kernels_of: dict[str, list[dict]] = {}
    for record in manifest["kernels"]:
        kernels_of.setdefault(record["module"], []).append(record)
    written = []
    for module, records in kernels_of.items():
        source = module_source(source_root, module)
        stub = out / stub_path(module)
        stub.parent.mkdir(parents=True, exist_ok=True)
        stub.write_text(module_stub(ast.parse(source.read_text(), filename=str(source)), records,
                                    source.relative_to(source_root).as_posix()))
        written.append(stub)
    if written:
        (out / PY_TYPED).write_text("")
        written.append(out / PY_TYPED)
    return written


def module_source(source_root: Path, module: str) -> Path:
    """The source file of dotted ``module`` under ``source_root``."""
    base = source_root.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def stub_path(module: str) -> Path:
    """Where dotted ``module``'s stub lies, relative to its top-level package."""
    parts = module.split(".")[1:]
    return Path(*parts).with_suffix(".pyi") if parts else Path("__init__.pyi")


def wheel_files(artifacts_dir: Path, package_dir: Path) -> dict[Path, str]:
    """Each staged stub file -> its path in the wheel, next to its module.

    Files the package's sources already have (a hand-written ``.pyi``,
    ``py.typed``) are left out: the wheel takes those from the sources.
    """
    stubs = artifacts_dir / STUBS_DIR
    if not stubs.is_dir():
        return {}
    files = {}
    for path in sorted(p for p in stubs.rglob("*") if p.is_file()):
        rel = path.relative_to(stubs)
        if not (package_dir / rel).exists():
            files[path] = f"{package_dir.name}/{rel.as_posix()}"
    return files


# --------------------------------------------------------------------------- one module


def module_stub(tree: ast.Module, kernels: list[dict], display_file: str) -> str:
    """The ``.pyi`` text of a module whose compiled kernels are ``kernels`` (manifest records)."""
    by_name = {record["name"]: record for record in kernels}
    device_names = _kernel_language_names(tree)
    body: list[str] = []
    incomplete = False
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name in by_name:
            body.append(_kernel_stub(by_name[stmt.name]))
            continue
        lines = _statement_stub(stmt, device_names)
        if lines is None:
            incomplete = True
        else:
            body.extend(lines)
    kinds = {record.get("kind", "simt") for record in kernels}
    head = [
        f"# type stub of {display_file}, written by buildtile from the module's source and its compiled kernels",
        "from typing import Any as _Any, Protocol as _Protocol",
        f"from {_TYPING} import ArrayArg as _ArrayArg, StreamArg as _StreamArg",
    ]
    if "simt" in kinds:
        head.append(f"from {_TYPING} import SimtKernel as _SimtKernel, SimtLaunch as _SimtLaunch")
    if "tile" in kinds:
        head.append(f"from {_TYPING} import TileKernel as _TileKernel, TileLaunch as _TileLaunch, "
                    "TilePartitionArg as _TilePartitionArg, TileTensorArg as _TileTensorArg")
    if incomplete:
        # names bound where a stub cannot follow read as Any instead of vanishing
        body.append("def __getattr__(name: str) -> _Any: ...")
    return "\n".join(head) + "\n\n" + "\n".join(body) + "\n"


def _kernel_stub(record: dict) -> str:
    name = record["name"]
    tile = record.get("kind", "simt") == "tile"
    params = ", ".join(f"{p['name']}: {_param_type(p, tile)}" for p in record["params"])
    params = f"{params}, /" if params else ""
    if tile:
        return (f"class _{name}__kernel(_TileKernel, _Protocol):\n"
                f"    def __call__(self, {params}) -> _TileLaunch: ...\n"
                f"{name}: _{name}__kernel\n")
    stream = f"{params}, *, stream: _StreamArg = None" if params else "*, stream: _StreamArg = None"
    return (f"class _{name}__launch(_SimtLaunch, _Protocol):\n"
            f"    def __call__(self, {stream}) -> None: ...\n"
            f"class _{name}__kernel(_SimtKernel[_{name}__launch], _Protocol): ...\n"
            f"{name}: _{name}__kernel\n")


def _param_type(param: dict, tile: bool) -> str:
    kind = param["kind"]
    if kind == "scalar":
        dtype = param["dtype"]
        return _SCALAR_TYPES.get(dtype, "int")
    if kind == "tile_out":
        return "_TilePartitionArg"
    return "_ArrayArg | _TileTensorArg" if tile else "_ArrayArg"


# --------------------------------------------------------------------------- other statements


def _statement_stub(stmt: ast.stmt, device_names: set[str]) -> list[str] | None:
    """The stub lines of one top-level statement; None when a stub cannot follow what it binds."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [_reexport(stmt)]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [ast.unparse(_signature(stmt, device_names)) + "\n"]
    if isinstance(stmt, ast.ClassDef):
        return [ast.unparse(_class_stub(stmt, device_names)) + "\n"]
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        return _variable_stub(stmt, device_names)
    if isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
        lines: list[str] = []
        for inner in stmt.body:
            inner_lines = _statement_stub(inner, device_names)
            if inner_lines is None:
                return None
            lines.extend(inner_lines)
        return lines
    if isinstance(stmt, (ast.Expr, ast.Pass, ast.Assert, ast.Delete)):
        return []            # a docstring or a call binds no name (`del` only removes one)
    return None


def _reexport(stmt: ast.Import | ast.ImportFrom) -> str:
    """An import as a stub writes one the module re-exports: ``from m import x as x``."""
    names = []
    for alias in stmt.names:
        if alias.name == "*":
            names.append(alias)
        elif isinstance(stmt, ast.Import) and alias.asname is None and "." in alias.name:
            names.append(alias)                      # `import a.b` binds `a`, as it is
        else:
            bound = alias.asname or alias.name
            names.append(ast.alias(alias.name, bound))
    node = type(stmt)(**{**{f: getattr(stmt, f) for f in stmt._fields}, "names": names})
    return ast.unparse(node)


def _signature(func: ast.FunctionDef | ast.AsyncFunctionDef, device_names: set[str]):
    args = func.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None and arg.annotation is not None:
            arg.annotation = _annotation(arg.annotation, device_names)
    args.defaults = [_ellipsis() for _ in args.defaults]
    args.kw_defaults = [None if d is None else _ellipsis() for d in args.kw_defaults]
    if func.returns is not None:
        func.returns = _annotation(func.returns, device_names)
    func.body = [ast.Expr(_ellipsis())]
    return func


def _class_stub(cls: ast.ClassDef, device_names: set[str]) -> ast.ClassDef:
    body: list[ast.stmt] = []
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body.append(_signature(stmt, device_names))
        elif isinstance(stmt, ast.ClassDef):
            body.append(_class_stub(stmt, device_names))
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            body.extend(ast.parse(line).body[0] for line in _variable_stub(stmt, device_names))
    cls.body = body or [ast.Expr(_ellipsis())]
    return cls


def _variable_stub(stmt: ast.Assign | ast.AnnAssign, device_names: set[str]) -> list[str]:
    if isinstance(stmt, ast.AnnAssign):
        if not isinstance(stmt.target, ast.Name):
            return []
        return [f"{stmt.target.id}: {ast.unparse(_annotation(stmt.annotation, device_names))}"]
    names = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if names == ["__all__"]:
        return [ast.unparse(stmt)]
    value = stmt.value
    kind = type(value.value).__name__ if isinstance(value, ast.Constant) and isinstance(
        value.value, _LITERAL_TYPES) else "_Any"
    bound = [n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return [f"{name}: {kind if name in names else '_Any'}" for name in bound]


def _annotation(node: ast.expr, device_names: set[str]) -> ast.expr:
    """``node``, or ``Any`` where it names a kernel-language type (device code's, not the host's)."""
    if any(isinstance(n, ast.Name) and n.id in device_names for n in ast.walk(node)):
        return ast.Name("_Any")
    return node


def _kernel_language_names(tree: ast.Module) -> set[str]:
    """Names the module imports from buildtile's kernel languages (``simt``, ``f32``, ``Slice``...)."""
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").split(".")[0] == "buildtile":
            names.update(alias.asname or alias.name for alias in stmt.names)
        elif isinstance(stmt, ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in stmt.names
                         if alias.name.split(".")[0] == "buildtile")
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _ellipsis() -> ast.Constant:
    return ast.Constant(...)


__all__ = ["PY_TYPED", "STUBS_DIR", "module_source", "module_stub", "stub_path", "wheel_files",
           "write_stubs"]
