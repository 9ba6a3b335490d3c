"""The name rules of a build, checked by ``buildtile check`` and the build alike.

A kernel's names reach three places: its PTX entry (:func:`buildtile.interop.abi.mangle`),
the C launchers and macros of ``kernels.h``, and the C++ wrappers of ``kernels.hpp``
(``namespace <package>::<module>``). Every rule here refuses, with a located
diagnostic, a name that would make one of them ambiguous or unusable, before
anything is compiled:

- BT0415: a parameter name or a decorator keyword given twice (Python refuses the
  module at import; the build would ship a package that cannot be imported);
- BT0428: two kernels of one name in one module, a kernel's name bound again at the top
  level of its module (a later ``def``, an assignment, an import), two kernels with one PTX entry
  name (also when they differ only in case: the C macros are upper-case), and a
  kernel whose name is a C++ name generated for another (``scale_block`` beside
  ``scale``, ``copy_unsafe`` beside a contract-less ``copy``, ``delete_`` beside
  ``delete``, a kernel named as a sibling module's namespace);
- BT0430: a kernel defined inside an ``if``/``for``/``with``/``try`` block or a
  function: static discovery reads the module's top level only, so it would be
  left out of the build;
- BT0431: a name the generated code cannot use: a kernel or module name that is
  not an ASCII identifier, a module named as the runtime's own C++ namespaces (``buildtile``,
  ``std``) or the package's build folder (``_buildtile``), a kernel named
  ``check_abi`` in the package's top-level module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from buildtile.backend import Backend, KernelSource
from buildtile.diagnostics import Diagnostic, Span
from buildtile.discovery import KernelModule, import_namespace, parse_module, resolve_dotted
from buildtile.interop.abi import mangle
from buildtile.interop.c_syntax import identifier

#: module name parts the generated code cannot have: why, for the diagnostic
RESERVED_MODULE_PARTS = {
    "buildtile": "`buildtile` is the C++ namespace of the runtime header; inside the package's "
                 "namespace a nested `buildtile` would hide it",
    "std": "`std` is the C++ standard library's namespace; inside the package's namespace a "
           "nested `std` would hide it",
    "_buildtile": "`_buildtile` is the folder the build writes the package's kernels into",
}

#: C++ names the package's own namespace declares besides its kernels
PACKAGE_NAMESPACE_NAMES = ("check_abi",)

#: statements whose bodies static discovery does not read, and how a diagnostic names each
_COMPOUND = {ast.If: "an `if` block", ast.For: "a `for` loop", ast.AsyncFor: "a `for` loop",
             ast.While: "a `while` loop", ast.With: "a `with` block", ast.AsyncWith: "a `with` block",
             ast.Try: "a `try` block", ast.TryStar: "a `try` block", ast.Match: "a `match` block",
             ast.ClassDef: "a class", ast.FunctionDef: "a function", ast.AsyncFunctionDef: "a function"}


def check_module(module: KernelModule, backends: dict[str, Backend], display_root) -> list[Diagnostic]:
    """The rules about one module as a whole: its name, and kernels discovery cannot find."""
    tree, lines, display = parse_module(module, display_root)
    diags = _module_name(module.name, display, lines)
    decorators = {b.decorator_module + ".kernel" for b in backends.values()}
    ns = import_namespace(tree, module.name)
    for stmt in tree.body:
        if type(stmt) in _COMPOUND:
            diags += _nested_kernels(stmt, ns, decorators, display, lines)
    return diags + _rebound_kernels(tree, ns, decorators, display, lines)


def check_kernels(sources: Iterable[KernelSource]) -> list[Diagnostic]:
    """The rules about kernels: their parameters and keywords, and every name they generate."""
    sources = list(sources)
    diags: list[Diagnostic] = []
    for src in sources:
        diags += _repeated_parameters(src) + _repeated_keywords(src) + _kernel_name(src)
    diags += _duplicate_names(sources)
    return diags


def _span(src_file: str, lines: list[str], node: ast.AST) -> Span:
    return Span.of(node, src_file, lines)


def _name_span(src: KernelSource) -> Span:
    """The kernel's name in its ``def`` line."""
    line = src.lines[src.node.lineno - 1] if src.node.lineno <= len(src.lines) else ""
    col = line.find(src.name, src.node.col_offset)
    if col < 0:
        return Span.of(src.node, src.display_file, src.lines)
    return Span(src.display_file, src.node.lineno, col, col + len(src.name), line)


def _module_name(name: str, display: str, lines: list[str]) -> list[Diagnostic]:
    span = Span(display, 1, 0, None, lines[0] if lines else "")
    diags = []
    for part in name.split("."):
        if not (part.isascii() and part.isidentifier()):
            diags.append(Diagnostic(
                "BT0431", f"module `{name}` has a name that is not an ASCII identifier", span,
                label="in this module",
                help="kernel modules export their names to PTX and C, which take ASCII identifiers only; rename it"))
            break
        elif part in RESERVED_MODULE_PARTS:
            diags.append(Diagnostic(
                "BT0431", f"a kernel module cannot be named `{name}`", span, label="in this module",
                notes=(RESERVED_MODULE_PARTS[part],), help=f"rename the module so that no part of it is `{part}`"))
    return diags


def _nested_kernels(stmt: ast.stmt, ns: dict[str, str], decorators: set[str], display: str,
                    lines: list[str]) -> list[Diagnostic]:
    diags = []
    where = _COMPOUND[type(stmt)]
    for node in ast.walk(stmt):
        if node is stmt or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in node.decorator_list:
            if _is_kernel_decorator(deco, ns, decorators):
                diags.append(Diagnostic(
                    "BT0430", f"kernel `{node.name}` is defined inside {where}", _span(display, lines, deco),
                    label="not at the top level of the module",
                    notes=(f"the enclosing statement is at line {stmt.lineno}; the build finds kernels only at "
                           "the top level of a module, so this one would be left out of the package",),
                    help="define the kernel at the top level; choose between kernels at launch time instead"))
    return diags


def _is_kernel_decorator(deco: ast.expr, ns: dict[str, str], decorators: set[str]) -> bool:
    return resolve_dotted(deco.func if isinstance(deco, ast.Call) else deco, ns) in decorators


def _bound_names(stmt: ast.stmt) -> list[tuple[str, ast.AST]]:
    """The names a top-level statement binds, each with the node to point at."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [(stmt.name, stmt)]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [((a.asname or a.name).split(".")[0], a) for a in stmt.names]
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
        stmt, (ast.AnnAssign, ast.AugAssign)) else []
    return [(n.id, n) for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _rebound_kernels(tree: ast.Module, ns: dict[str, str], decorators: set[str], display: str,
                     lines: list[str]) -> list[Diagnostic]:
    """A top-level kernel whose name the module binds again to something else: the module's
    attribute would then not be the kernel the package was built with."""
    kernels = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)
               and any(_is_kernel_decorator(d, ns, decorators) for d in s.decorator_list)}
    diags = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and any(_is_kernel_decorator(d, ns, decorators)
                                                     for d in stmt.decorator_list):
            continue   # a kernel; two of one name are check_kernels' to report
        for name, node in _bound_names(stmt):
            if name in kernels:
                kernel = kernels[name]
                diags.append(Diagnostic(
                    "BT0428", f"kernel `{name}` is bound again in its module", _span(display, lines, node),
                    label=f"this rebinds `{name}`",
                    notes=(f"the kernel is defined at line {kernel.lineno}; the module's `{name}` would "
                           "not be the kernel the package was built with",),
                    help="give the kernel or the other binding another name"))
    return diags


def _repeated_parameters(src: KernelSource) -> list[Diagnostic]:
    args = src.node.args
    seen: dict[str, ast.arg] = {}
    diags = []
    for a in [*args.posonlyargs, *args.args, *([args.vararg] if args.vararg else []), *args.kwonlyargs,
              *([args.kwarg] if args.kwarg else [])]:
        if a.arg in seen:
            diags.append(Diagnostic(
                "BT0415", f"parameter `{a.arg}` is bound more than once in the parameter list of `{src.name}`",
                Span(src.display_file, a.lineno, a.col_offset, a.col_offset + len(a.arg),
                     src.lines[a.lineno - 1] if a.lineno <= len(src.lines) else ""),
                label="used as a parameter more than once",
                notes=(f"first bound at line {seen[a.arg].lineno}",),
                help="give each parameter its own name (Python refuses this module when it is imported)"))
        else:
            seen[a.arg] = a
    return diags


def _repeated_keywords(src: KernelSource) -> list[Diagnostic]:
    if not isinstance(src.decorator, ast.Call):
        return []
    seen: set[str] = set()
    diags = []
    for kw in src.decorator.keywords:
        if kw.arg is None:
            continue
        if kw.arg in seen:
            diags.append(Diagnostic(
                "BT0415", f"keyword `{kw.arg}` is given more than once to the decorator of `{src.name}`",
                Span.of(kw, src.display_file, src.lines), label="repeated here",
                help=f"keep one `{kw.arg}=` (Python refuses this module when it is imported)"))
        seen.add(kw.arg)
    return diags


def _kernel_name(src: KernelSource) -> list[Diagnostic]:
    diags = []
    if not src.name.isascii():
        diags.append(Diagnostic(
            "BT0431", f"kernel `{src.name}` has a name that is not ASCII", _name_span(src),
            help="a kernel's name is its PTX entry and C launcher name, which take ASCII identifiers only; rename it"))
    if src.module.count(".") == 0 and src.name in PACKAGE_NAMESPACE_NAMES:
        diags.append(Diagnostic(
            "BT0431", f"a kernel of the package's top-level module cannot be named `{src.name}`", _name_span(src),
            notes=(f"the C++ header declares `{src.module}::{src.name}()` itself",),
            help="rename the kernel, or move it into a submodule"))
    return diags


def _has_block(src: KernelSource) -> bool:
    return isinstance(src.decorator, ast.Call) and any(kw.arg == "block" for kw in src.decorator.keywords)


def cpp_names(src: KernelSource) -> dict[str, str]:
    """The C++ names the header declares for a kernel in its module's namespace -> what each is."""
    if src.kind == "tile":
        return {identifier(src.name): "launch function", identifier(src.name + "_launch"): "launch class"}
    if _has_block(src):
        return {identifier(src.name): "launch function", identifier(src.name + "_block"): "block shape constant"}
    return {identifier(src.name + "_unsafe"): "unsafe launch function (it has no launch contract)"}


def _duplicate_names(sources: list[KernelSource]) -> list[Diagnostic]:
    diags = []
    by_module: dict[tuple[str, str], KernelSource] = {}
    by_symbol: dict[str, KernelSource] = {}
    cpp: dict[tuple[str, str], tuple[KernelSource, str]] = {}   # (namespace, C++ name) -> kernel, what
    for src in sources:
        first = by_module.get((src.module, src.name))
        if first is not None:
            diags.append(_defined_twice(src, first, f"kernel `{src.name}` is defined more than once in "
                                                    f"module `{src.module}`", "redefined here"))
            continue
        by_module[(src.module, src.name)] = src
        symbol = mangle(src.module, src.name).upper()
        first = by_symbol.get(symbol)
        if first is not None:
            diags.append(_defined_twice(
                src, first, f"kernels `{src.module}.{src.name}` and `{first.module}.{first.name}` differ only in case",
                "its C macros would be those of the other",
                "the C header's macros (`BT_..._BLOCK_X`) are upper-case, so kernel names must differ in more than case"))
            continue
        by_symbol[symbol] = src
    # C++: each module's namespace holds its kernels' names and its submodules' namespaces
    modules = {src.module for src in sources}
    for module in sorted(modules):
        parts = module.split(".")
        for depth in range(1, len(parts)):
            cpp.setdefault((".".join(parts[:depth]), identifier(parts[depth])), (None, f"namespace of module "
                                                                                     f"`{'.'.join(parts[:depth + 1])}`"))
    for src in sources:
        if by_module.get((src.module, src.name)) is not src:
            continue
        for name, what in cpp_names(src).items():
            key = (src.module, name)
            if key in cpp:
                other, other_what = cpp[key]
                if other is src:
                    continue
                owner = f"the {other_what}" if other is None else f"the {other_what} of kernel `{other.name}`"
                diags.append(Diagnostic(
                    "BT0428", f"kernel `{src.name}` needs the C++ name `{name}`, which is already {owner}",
                    _name_span(src), label=f"its {what} would be `{src.module.replace('.', '::')}::{name}`",
                    notes=() if other is None else (f"`{other.name}` is defined at line {other.node.lineno}",),
                    help="rename one of them"))
            else:
                cpp[key] = (src, what)
    return diags


def _defined_twice(src: KernelSource, first: KernelSource, message: str, label: str, note: str = "") -> Diagnostic:
    where = f"{first.display_file}:{first.node.lineno}"
    return Diagnostic("BT0428", message, _name_span(src), label=label,
                      notes=(f"`{first.name}` is first defined at {where}",) + ((note,) if note else ()),
                      help="rename one of them: each kernel's name is its name in the package and in C and C++")
