"""``buildtile check``: every build-time check, no PTX."""

from __future__ import annotations

from pathlib import Path

from buildtile.backend import CompileOptions
from buildtile.diagnostics import Diagnostic, unique
from buildtile.discovery import KernelModule, find_kernels
from buildtile.deep_stack import deep_stack, too_deep
from buildtile.errors import CompileError
from buildtile.names import check_kernels, check_module
from buildtile.plugins import backends as registered_backends


@deep_stack
def check_file(path: str | Path, display_root: str | Path | None = None,
               module: str | None = None) -> tuple[int, list[Diagnostic]]:
    """Check every kernel in one source file; returns (kernels found, diagnostics).

    A lone file names no targets, so the per-target checks of a project build do not run."""
    path = Path(path).resolve()
    root = Path(display_root).resolve() if display_root else path.parent
    backends = registered_backends()
    kernel_module = KernelModule(module or path.stem, path)
    try:
        sources = find_kernels(kernel_module, backends, root)
    except CompileError as err:
        return 0, err.diagnostics
    diags: list[Diagnostic] = check_module(kernel_module, backends, root) + check_kernels(sources)
    for src in sources:
        try:
            backends[src.kind].impl.analyze(src, CompileOptions())
        except CompileError as err:
            diags.extend(err.diagnostics)
        except RecursionError:
            diags.append(too_deep(src))
    return len(sources), unique(diags)


@deep_stack
def check_project(root: str | Path) -> tuple[int, list[Diagnostic]]:
    """Check every kernel module listed in a project's ``[tool.buildtile]``, and, once every
    kernel checks clean, each backend's refusals of the project's targets (as a build does)."""
    from buildtile.compiler import analyze, check_targets, compile_entries, discover, project_targets
    from buildtile.config import compile_options, load_project

    project = load_project(root)
    options = compile_options(project.settings)
    sources: list = []
    try:
        sources = discover(project)
        check_targets(compile_entries(analyze(sources, options), options), project_targets(project), options)
    except CompileError as err:
        return len(sources), unique(err.diagnostics)
    return len(sources), []
