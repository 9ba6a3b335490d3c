"""Static kernel discovery: parse the listed modules, never import them."""

from __future__ import annotations

import ast
import glob
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

from buildtile.backend import Backend, KernelSource
from buildtile.diagnostics import Diagnostic, Span
from buildtile.errors import CompileError, ConfigError


@dataclass(frozen=True)
class KernelModule:
    name: str      # dotted module name
    path: Path     # absolute source path


def source_roots(root: Path) -> list[Path]:
    """Where packages live: the project root (flat layout) and ``src/``."""
    return [root, root / "src"] if (root / "src").is_dir() else [root]


def resolve_modules(root: Path, patterns: list[str], where: str = "pyproject.toml") -> list[KernelModule]:
    """Turn ``kernels = [...]`` entries (dotted names or path globs) into files."""
    found: dict[Path, KernelModule] = {}
    for pattern in patterns:
        matches = _resolve_one(root, pattern)
        if not matches:
            raise ConfigError(
                f"tool.buildtile.kernels: `{pattern}` matches no Python module (in {where})",
                help="list dotted module names (`pkg.ops`) or globs relative to the project (`pkg/tiles/*.py`)",
            )
        for m in matches:
            found.setdefault(m.path, m)
    return sorted(found.values(), key=lambda m: m.name)


def _resolve_one(root: Path, pattern: str) -> list[KernelModule]:
    is_path = "/" in pattern or pattern.endswith(".py") or any(c in pattern for c in "*?[")
    out = []
    for base in source_roots(root):
        if is_path:
            paths = [Path(p) for p in sorted(glob.glob(str(base / pattern), recursive=True))]
        else:
            rel = Path(*pattern.split("."))
            paths = [p for p in (base / rel.with_suffix(".py"), base / rel / "__init__.py") if p.is_file()]
        for path in paths:
            if path.suffix == ".py" and path.is_file():
                out.append(KernelModule(_module_name(base, path, pattern), path.resolve()))
        if out:
            break
    return out


def _module_name(base: Path, path: Path, pattern: str) -> str:
    try:
        rel = path.resolve().relative_to(base.resolve()).with_suffix("")
    except ValueError:   # a link (to the file or a folder above it) leads out of the source folder
        raise ConfigError(
            f"tool.buildtile.kernels: `{pattern}` finds {path}, which is a link to {path.resolve()}, "
            f"outside {base}",
            help="kernel modules live in the project's package, where builds and source distributions "
                 "see them: copy the module in rather than linking to it",
        ) from None
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_namespace(module_ast: ast.Module, module_name: str) -> dict[str, str]:
    """Local name -> dotted target, from the module's top-level imports."""
    ns: dict[str, str] = {}
    package = module_name.rsplit(".", 1)[0] if "." in module_name else ""
    for stmt in module_ast.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    ns[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    ns[top] = top
        elif isinstance(stmt, ast.ImportFrom):
            base = stmt.module or ""
            if stmt.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (stmt.level - 1)] if stmt.level > 1 else parts
                base = ".".join([*parts, base] if base else parts)
            for alias in stmt.names:
                ns[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
    return ns


def parse_module(module: KernelModule, display_root: Path) -> tuple[ast.Module, list[str], str]:
    try:
        display = str(module.path.relative_to(display_root))
    except ValueError:
        display = str(module.path)
    text = read_source(module.path, display)
    lines = text.splitlines()
    try:
        tree = ast.parse(text, filename=display)
    except RecursionError:   # deeper than the parser may nest, even on the compiler's deep stack
        raise CompileError([Diagnostic("BT0200", "this module nests its expressions too deeply to parse",
                                       Span(display, 1, 0, None, lines[0] if lines else ""),
                                       help="split the longest expression into a few intermediate variables")]) from None
    except SyntaxError as exc:
        span = Span(display, exc.lineno or 1, (exc.offset or 1) - 1, None,
                    lines[exc.lineno - 1] if exc.lineno and exc.lineno <= len(lines) else "")
        raise CompileError([Diagnostic("BT0001", f"syntax error: {exc.msg}", span)]) from None
    return tree, lines, display


def read_source(path: Path, display: str) -> str:
    """A module's text, decoded as Python does: UTF-8 unless a coding comment says otherwise."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"kernel module {display} cannot be read: {exc.strerror}") from None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:   # a coding comment naming an unknown encoding, or a bad BOM
        line = exc.lineno or 1
        raise CompileError([Diagnostic("BT0001", f"syntax error: {exc.msg}",
                                       Span(display, line, 0, None, _line_of(data, line)))]) from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1)
        raise CompileError([Diagnostic(
            "BT0001", f"syntax error: the file is not valid {encoding} text (byte 0x{data[exc.start]:02x} "
                      f"at line {line}, column {col + 1})",
            Span(display, line, col, None, _line_of(data, line)),
            help="save the module as UTF-8, or declare its encoding in a `# -*- coding: ... -*-` comment")]) from None


def _line_of(data: bytes, line: int) -> str:
    lines = data.splitlines()
    return lines[line - 1].decode("utf-8", errors="replace") if 0 < line <= len(lines) else ""


def find_kernels(module: KernelModule, backends: dict[str, Backend], display_root: Path) -> list[KernelSource]:
    """Every function in ``module`` decorated with a registered backend's ``kernel``."""
    tree, lines, display = parse_module(module, display_root)
    ns = import_namespace(tree, module.name)
    by_decorator = {b.decorator_module + ".kernel": b for b in backends.values()}
    kernels = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.FunctionDef):
            continue
        for deco in stmt.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            backend = by_decorator.get(resolve_dotted(target, ns) or "")
            if backend is not None:
                kernels.append(KernelSource(
                    kind=backend.kind, name=stmt.name, module=module.name, file=module.path,
                    display_file=display, node=stmt, decorator=deco, module_ast=tree,
                    lines=lines, namespace=ns,
                ))
    return kernels


def resolve_dotted(node: ast.AST, ns: dict[str, str]) -> str | None:
    """`simt.index_1d` -> `buildtile.simt.index_1d` through the module's imports."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in ns:
        return None
    return ".".join([ns[node.id], *reversed(parts)])
