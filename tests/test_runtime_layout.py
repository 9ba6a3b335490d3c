"""The host runtime's module layout: no import circle, and no module reaching into another's private names.

Checked from the source (an import graph and the attribute reads of every
module), and by importing each module first in a fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import buildtile

ROOT = Path(buildtile.__file__).parent
#: the modules of the host: everything a launch imports, and the manifest model they read
HOST_DIRS = ("runtime",)
HOST_FILES = ("interop/manifest.py", "interop/c_model.py", "interop/c_tile.py", "interop/c_requires.py",
              "interop/c_shim.py", "interop/c_headers.py", "interop/host_cli.py", "tile.py")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _host_modules() -> dict[str, Path]:
    paths = [p for d in HOST_DIRS for p in (ROOT / d).rglob("*.py")] + [ROOT / f for f in HOST_FILES]
    return {_module_name(p): p for p in sorted(paths)}


MODULES = _host_modules()


def _imports(path: Path, name: str) -> set[str]:
    """The buildtile modules ``path`` imports when it is imported (not under TYPE_CHECKING, not
    inside functions: those run later, once every module is loaded)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for child in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) else ():
            if isinstance(child, ast.Import):
                found |= {a.name for a in child.names}
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - child.level + 1] + [base])
                found.add(base)
                found |= {f"{base}.{a.name}" for a in child.names}
        if isinstance(node, ast.ClassDef):  # class bodies run at import time too
            for child in ast.walk(node):
                if isinstance(child, ast.ImportFrom) and child.module:
                    found.add(child.module)
    return {m for m in found if m.startswith("buildtile")}


def test_host_modules_import_no_circle():
    known = set(MODULES)
    graph = {name: {m for m in _imports(path, name) if m in known and m != name} for name, path in MODULES.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):] + [dep]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    assert "buildtile.runtime.tile.handles" in graph  # the walk saw the tile package


def test_no_host_module_imports_the_compiler():
    for name, path in MODULES.items():
        for dep in _imports(path, name):
            assert not dep.startswith(("buildtile.backends", "buildtile.compiler")), f"{name} imports {dep}"
            assert "llvmlite" not in dep, f"{name} imports {dep}"


#: a fresh interpreter that has imported nothing of buildtile forks one child per module named on its
#: command line, which imports that module first; NumPy, which they all need, is imported once before
_EACH_FIRST = """
import importlib, os, sys, traceback
import numpy
assert not [m for m in sys.modules if m.split(".")[0] == "buildtile"]
for name in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            print(f"{name}: {traceback.format_exc().strip().splitlines()[-1]}", flush=True)
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) not in (0, 1):
        print(f"{name}: its interpreter died ({status})", flush=True)
"""


def test_every_host_module_imports_first_in_a_fresh_interpreter():
    # one interpreter per module, each imported before anything else of buildtile
    script = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    each = subprocess.run([sys.executable, "-c", _EACH_FIRST, *MODULES], capture_output=True, text=True, check=False)
    assert each.returncode == 0, each.stderr
    failures = each.stdout.splitlines()
    # and all of them, in order and in reverse, in one interpreter each
    for order in (list(MODULES), list(reversed(MODULES))):
        done = subprocess.run([sys.executable, "-c", script, *order], capture_output=True, text=True)
        if done.returncode:
            failures.append(f"{order[0]}...: {done.stderr.strip().splitlines()[-1]}")
    assert not failures, "\n".join(failures)


def _private_reads(path: Path) -> list[tuple[int, str]]:
    """``x._name`` where ``x`` is not ``self``/``cls`` (another object's private member), and
    ``from buildtile... import _name``."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            found.append((node.lineno, f"{ast.unparse(owner)}.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("buildtile"):
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def _own_members(path: Path) -> set[str]:
    """The attribute names the module's own classes set on ``self`` or list in ``__slots__``
    (objects of those classes may read them anywhere in the module)."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == "__slots__" and isinstance(node.value, ast.Tuple):
                    names |= {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    return names


#: private names read on purpose, each for its reason
ALLOWED = {
    "buildtile.runtime._native",   # the compiled module, imported only by its gateway runtime/native.py
    "torch._C",                    # PyTorch's current-stream query, which it exposes nowhere else
    "buildtile.types._ParamKind",  # tile.Out is made like the other parameter kinds of the language surface
    # an eager torch op skips the dispatcher only when PyTorch says nothing would intercept the call;
    # those states are exposed only privately (each read falls back to the dispatcher when missing)
    "torch._ops",
    "torch._C._is_torch_function_mode_enabled",
    "torch._C._len_torch_dispatch_stack",
    "torch._C._are_functorch_transforms_active",
    "torch._C._is_tracing",
    "PROFILER._is_profiler_enabled",
    "packet._qualified_op_name",
}


def test_no_host_module_reads_another_modules_private_names():
    crossings = []
    for name, path in MODULES.items():
        own = _own_members(path)
        for line, text in _private_reads(path):
            member = text.rpartition(".")[2]
            if text in ALLOWED:
                continue
            if text.startswith("buildtile.") or member not in own:
                crossings.append(f"{path.relative_to(ROOT)}:{line}: {text}")
    assert not crossings, "private names read across modules:\n" + "\n".join(crossings)
