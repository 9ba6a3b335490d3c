"""Backends are pluggy plugins found through the `buildtile.backends` entry points."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from buildtile import plugins
from buildtile.compiler import compile_project
from buildtile.config import load_project

TOY_PLUGIN = '''
from buildtile import hookimpl
from buildtile.backend import AnalyzedKernel, Backend, BackendImpl, CompileEntry
from buildtile.diagnostics import Diagnostic, Span

PTX = """
.version 8.0
.target {target}
.address_size 64
.visible .entry {symbol}(.param .u64 p)
{{
    ret;
}}
"""


class ToyImpl(BackendImpl):
    def analyze(self, source, options):
        symbol = "toy_" + source.name
        return AnalyzedKernel(source=source, symbol=symbol, params=[], contract={"block": None,
                              "index_dims": 0, "min_blocks": None, "dynamic_shared": 0,
                              "min_compute_capability": None, "requires": []}, ir=None)

    def entries(self, kernel, options):
        return [CompileEntry(kernel.symbol, llvm_ir=None)]   # no LLVM IR: PTX of its own

    def check_target(self, kernel, entry, target, options):
        if target == "sm_90":
            return []
        src = kernel.source
        return [Diagnostic("BT0600", f"toy kernels run on sm_90 alone, not {target}",
                           Span.of(src.decorator, src.display_file, src.lines))]

    def ptx(self, kernel, entry, target, options):
        return PTX.format(target=target, symbol=entry.symbol)


@hookimpl
def buildtile_register_backends(register):
    register(Backend(kind="toy", decorator_module="toy_backend.lang", impl=ToyImpl(), version="0.1"))
'''


@pytest.fixture
def toy_backend_installed(tmp_path, monkeypatch):
    """A third-party backend package, installed only as metadata on sys.path."""
    site = tmp_path / "site"
    (site / "toy_backend").mkdir(parents=True)
    (site / "toy_backend" / "__init__.py").write_text("")
    (site / "toy_backend" / "lang.py").write_text("def kernel(fn=None, **kw):\n    return fn\n")
    (site / "toy_backend" / "plugin.py").write_text(TOY_PLUGIN)
    dist = site / "toy_backend-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-backend\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[buildtile.backends]\ntoy = toy_backend.plugin\n")
    monkeypatch.syspath_prepend(str(site))
    plugins.plugin_manager.cache_clear()
    yield
    plugins.plugin_manager.cache_clear()
    for name in [m for m in sys.modules if m.startswith("toy_backend")]:
        del sys.modules[name]


def toy_project(root, targets: list[str]):
    (root / "toypkg").mkdir(parents=True)
    (root / "toypkg" / "__init__.py").write_text("")
    (root / "toypkg" / "kern.py").write_text(textwrap.dedent("""
        from toy_backend import lang as toy

        @toy.kernel
        def nothing(p):
            pass
    """))
    (root / "pyproject.toml").write_text(textwrap.dedent(f"""
        [project]
        name = "toypkg"
        version = "0.1"
        [tool.buildtile]
        kernels = ["toypkg.kern"]
        targets = {json.dumps(targets)}
    """))
    return root


def test_third_party_backend_is_found_through_entry_points_and_used(toy_backend_installed, tmp_path):
    project_dir = toy_project(tmp_path / "proj", ["sm_90"])
    assert set(plugins.backends()) >= {"simt", "toy"}
    manifest = compile_project(load_project(project_dir), tmp_path / "out", log=lambda _: None)
    (kernel,) = manifest["kernels"]
    assert (kernel["kind"], kernel["symbol"]) == ("toy", "toy_nothing")
    written = json.loads((tmp_path / "out/toypkg/_buildtile/manifest.json").read_text())
    cubin = tmp_path / "out/toypkg/_buildtile" / written["kernels"][0]["artifacts"]["sm_90"]["path"]
    assert cubin.read_bytes()[:4] == b"\x7fELF" and b"toy_nothing" in cubin.read_bytes()


def test_third_party_backend_refuses_a_target_before_anything_is_compiled(toy_backend_installed, tmp_path):
    from buildtile.errors import CompileError

    project_dir = toy_project(tmp_path / "proj", ["sm_80", "sm_90"])
    with pytest.raises(CompileError) as err:
        compile_project(load_project(project_dir), tmp_path / "out", log=lambda _: None)
    (diag,) = err.value.diagnostics
    assert (diag.code, diag.message) == ("BT0600", "toy kernels run on sm_90 alone, not sm_80")
    assert (diag.span.file, diag.span.line, diag.span.col + 1) == ("toypkg/kern.py", 4, 2)
    assert not (tmp_path / "out/toypkg").exists()


def test_a_backend_impl_that_is_not_a_backend_impl_is_refused():
    import pluggy

    from buildtile import hookimpl, hookspecs
    from buildtile.backend import Backend
    from buildtile.errors import BuildtileError

    class Plugin:
        @hookimpl
        def buildtile_register_backends(self, register):
            register(Backend(kind="ducks", decorator_module="ducks.lang", impl=object()))

    pm = pluggy.PluginManager("buildtile")
    pm.add_hookspecs(hookspecs)
    pm.register(Plugin())
    with pytest.raises(BuildtileError, match="not a buildtile.backend.BackendImpl") as err:
        plugins.backends(pm)
    assert err.value.code == "BT0030"


def test_builtin_backend_is_declared_in_the_same_entry_point_group():
    from importlib.metadata import distribution, PackageNotFoundError

    try:
        eps = distribution("buildtile").entry_points
    except PackageNotFoundError:
        pytest.skip("buildtile runs from a source tree without installed metadata")
    assert any(ep.group == "buildtile.backends" and ep.value == "buildtile.backends.simt.plugin" for ep in eps)


def test_two_backends_claiming_one_kind_is_an_error():
    import pluggy

    from buildtile import hookimpl, hookspecs
    from buildtile.backend import Backend
    from buildtile.errors import BuildtileError

    class A:
        @hookimpl
        def buildtile_register_backends(self, register):
            register(Backend(kind="simt", decorator_module="other.simt", impl=object()))

    pm = pluggy.PluginManager("buildtile")
    pm.add_hookspecs(hookspecs)
    pm.register(A())
    import buildtile.backends.simt.plugin as simt_plugin
    pm.register(simt_plugin)
    with pytest.raises(BuildtileError, match="two plugins register a backend for kernel kind `simt`"):
        plugins.backends(pm)
