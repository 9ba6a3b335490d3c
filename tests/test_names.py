"""The name rules (buildtile/names.py) across modules, where one kernel file cannot show them:
``buildtile check`` and the build refuse the same names with the same located diagnostics,
and the mapping from (module, kernel) to PTX entry name is injective.

The single-module rules each have a must-fail kernel under tests/ui/fail.
"""

from __future__ import annotations

import itertools
import re
import textwrap
from pathlib import Path

import pytest

from buildtile.backend import CompileOptions
from buildtile.check import check_project
from buildtile.cli import main
from buildtile.compiler import analyze, compile_project, discover
from buildtile.config import load_project
from buildtile.errors import CompileError
from buildtile.interop.abi import mangle

KERNEL = """\
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256)
def {name}(x: Slice[f32], y: DisjointSlice[f32]):
    i = simt.index_1d()
    y[i] = {factor} * x[i]
"""


def write_project(root: Path, files: dict[str, str], kernels: list[str]) -> Path:
    """A project of package ``pkg`` with ``files`` (path -> text) and ``kernels`` listed."""
    for rel, text in {"pkg/__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    listed = ", ".join(f'"{k}"' for k in kernels)
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "pkg"\nversion = "0"\n[tool.buildtile]\nkernels = [{listed}]\ntargets = ["sm_80"]\n')
    return root


def kernel(name: str, factor: float = 2.0) -> str:
    return KERNEL.format(name=name, factor=factor)


def build_diagnostics(root: Path) -> list:
    """What the build refuses, before any compilation: discovery and the build-time checks."""
    project = load_project(root)
    with pytest.raises(CompileError) as info:
        analyze(discover(project), CompileOptions())
    return info.value.diagnostics


def located(diags) -> list[tuple[str, str, int, int]]:
    return [(d.code, d.span.file, d.span.line, d.span.col + 1) for d in diags]


# ------------------------------------------------------------------ injective symbols

def test_a_dot_and_an_underscore_in_a_module_name_give_two_entries(tmp_path):
    root = write_project(tmp_path, {"pkg/a_b.py": kernel("step"), "pkg/a/__init__.py": "",
                                    "pkg/a/b.py": kernel("step", 3.0)}, ["pkg.a_b", "pkg.a.b"])
    assert check_project(root) == (2, [])
    kernels = analyze(discover(load_project(root)), CompileOptions())
    symbols = {f"{k.source.module}.{k.source.name}": k.symbol for k in kernels}
    assert symbols == {"pkg.a_b.step": mangle("pkg.a_b", "step"), "pkg.a.b.step": mangle("pkg.a.b", "step")}
    assert len(set(symbols.values())) == 2


PARTS = ["a", "b", "a_b", "_a", "a_", "a__b", "b1", "k1", "x3a"]


def test_mangle_is_injective_over_awkward_names():
    pairs = [(".".join(mod), name) for n in (1, 2, 3) for mod in itertools.product(PARTS, repeat=n) for name in PARTS]
    symbols = [mangle(m, k) for m, k in pairs]
    assert len(set(symbols)) == len(pairs)
    # a tile specialization's tail cannot make one kernel's entry another's
    tails = {s + "__t128" for s in symbols}
    assert not tails & set(symbols)


def test_mangled_names_are_c_and_ptx_identifiers():
    for m, k in [("pkg.ops", "scale"), ("_pkg._private", "_k"), ("pkg", "x__y")]:
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", mangle(m, k))


# ------------------------------------------------------------------ check and the build agree

def test_a_module_named_like_the_runtime_namespace_is_refused_where_it_is(tmp_path):
    root = write_project(tmp_path, {"pkg/buildtile.py": kernel("scale")}, ["pkg.buildtile"])
    found, diags = check_project(root)
    assert located(diags) == [("BT0431", "pkg/buildtile.py", 1, 1)]
    assert "cannot be named `pkg.buildtile`" in diags[0].message
    assert located(build_diagnostics(root)) == located(diags)


@pytest.mark.parametrize("module", ["std", "_buildtile"])
def test_other_reserved_module_names_are_refused(tmp_path, module):
    root = write_project(tmp_path, {f"pkg/{module}.py": kernel("scale")}, [f"pkg.{module}"])
    assert [d.code for d in check_project(root)[1]] == ["BT0431"]


def test_a_module_whose_only_kernel_is_in_an_if_block_is_refused(tmp_path):
    imports, body = kernel("scale").split("\n\n\n", 1)
    nested = imports + "\nFAST = True\n\nif FAST:\n" + textwrap.indent(body, "    ")
    root = write_project(tmp_path, {"pkg/ops.py": nested}, ["pkg.ops"])
    found, diags = check_project(root)
    assert found == 0 and located(diags) == [("BT0430", "pkg/ops.py", 6, 6)]
    assert located(build_diagnostics(root)) == located(diags)


def test_a_kernel_named_like_a_submodule_namespace_is_refused(tmp_path):
    root = write_project(tmp_path, {"pkg/__init__.py": kernel("ops"), "pkg/ops.py": kernel("scale")},
                         ["pkg", "pkg.ops"])
    found, diags = check_project(root)
    assert located(diags) == [("BT0428", "pkg/__init__.py", 6, 5)]
    assert "namespace of module `pkg.ops`" in diags[0].message


def test_kernels_of_one_name_in_two_modules_are_fine(tmp_path):
    root = write_project(tmp_path, {"pkg/a.py": kernel("scale"), "pkg/b.py": kernel("scale", 3.0)},
                         ["pkg.a", "pkg.b"])
    assert check_project(root) == (2, [])


def test_the_build_stops_with_the_located_diagnostic_check_gives(tmp_path, capsys):
    two = kernel("step") + "\n\n" + kernel("step", 3.0).split("\n\n\n", 1)[1]
    root = write_project(tmp_path, {"pkg/ops.py": two}, ["pkg.ops"])
    assert main(["check", str(root)]) == 1
    checked = capsys.readouterr().err
    assert "error[BT0428]: kernel `step` is defined more than once in module `pkg.ops`" in checked
    assert "--> pkg/ops.py:12:5" in checked
    with pytest.raises(CompileError) as info:
        compile_project(load_project(root), tmp_path / "out", log=lambda _: None)
    assert located(info.value.diagnostics) == [("BT0428", "pkg/ops.py", 12, 5)]
    assert not (tmp_path / "out" / "pkg").exists()


def test_a_module_whose_name_is_not_an_identifier_is_refused(tmp_path):
    root = write_project(tmp_path, {"pkg/my-ops.py": kernel("scale")}, ["pkg/my-ops.py"])
    found, diags = check_project(root)
    assert located(diags) == [("BT0431", "pkg/my-ops.py", 1, 1)]
    assert "`pkg.my-ops` has a name that is not an ASCII identifier" in diags[0].message


def test_a_kernel_rebound_by_an_import_or_an_assignment_is_refused(tmp_path):
    text = kernel("scale") + "\n\nscale = None\nfrom math import sqrt as scale\n"
    root = write_project(tmp_path, {"pkg/ops.py": text}, ["pkg.ops"])
    found, diags = check_project(root)
    assert located(diags) == [("BT0428", "pkg/ops.py", 11, 1), ("BT0428", "pkg/ops.py", 12, 18)]
