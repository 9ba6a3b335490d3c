"""A tree built in place never launches a kernel whose source changed since the build."""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import sys
import textwrap
from pathlib import Path

import pytest

from buildtile.cli import main
from buildtile.errors import BuildtileError
from buildtile.interop.manifest import manifest_path, read
from buildtile.runtime import freshness
from buildtile.runtime.package import forget_package

OPS = textwrap.dedent('''\
    from buildtile import simt
    from buildtile.types import DisjointSlice, Slice, f32

    SCALE = 1.0


    @simt.kernel(block=128, requires=["len(a) == len(c)"])
    def vecadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]):
        i = simt.index_1d()
        if i < len(c):
            c[i] = (a[i] + b[i]) * SCALE


    @simt.kernel(block=128)
    def fill(c: DisjointSlice[f32]):
        i = simt.index_1d()
        if i < len(c):
            c[i] = SCALE
    ''')

_names = itertools.count()


@pytest.fixture
def project(tmp_path, monkeypatch, capsys):
    """A one-module project, built in place with ``buildtile build``; its package importable."""
    package = f"stale_kernels_{next(_names)}"
    root = tmp_path / "proj"
    (root / package).mkdir(parents=True)
    (root / "pyproject.toml").write_text(textwrap.dedent(f'''\
        [build-system]
        requires = ["buildtile"]
        build-backend = "buildtile.build"

        [project]
        name = "{package.replace('_', '-')}"
        version = "0.1.0"

        [tool.buildtile]
        kernels = ["{package}.ops"]
        targets = ["sm_90"]
        ptx = true

        [tool.buildtile.c-abi]
        enabled = false
        '''))
    (root / package / "__init__.py").write_text("")
    (root / package / "ops.py").write_text(OPS)
    assert main(["build", str(root)]) == 0
    capsys.readouterr()
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delenv(freshness.REBUILD_ENV, raising=False)
    yield root, package
    forget_package(package)
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]


def fresh_import(package: str):
    """The package's ``ops`` as a new process would see it: imported anew, manifest unread."""
    forget_package(package)
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    return importlib.import_module(f"{package}.ops")


def edit(root: Path, package: str, old: str, new: str) -> None:
    ops = root / package / "ops.py"
    text = ops.read_text()
    assert old in text
    ops.write_text(text.replace(old, new))


def add_alpha(root: Path, package: str) -> None:
    """A new scalar parameter of ``vecadd``, used in its body."""
    edit(root, package, "c: DisjointSlice[f32]):\n    i = simt.index_1d()\n    if i < len(c):\n"
                        "        c[i] = (a[i] + b[i])",
         "c: DisjointSlice[f32], alpha: f32):\n    i = simt.index_1d()\n    if i < len(c):\n"
         "        c[i] = (a[i] + b[i] + alpha)")


def launch_vecadd(ops, fake_gpu, n=256):
    a, b, c = fake_gpu.array(n), fake_gpu.array(n), fake_gpu.array(n)
    ops.vecadd[ops.vecadd.grid_for(n)](a, b, c)


def test_the_manifest_of_a_build_in_place_records_the_project_and_each_source_hash(project):
    root, package = project
    data = json.loads(manifest_path(root / package).read_text())
    assert data["in_place"] == {"project": str(root.resolve())}
    digest = hashlib.sha256((root / package / "ops.py").read_bytes()).hexdigest()
    for record in data["kernels"]:
        assert record["source"]["package_file"] == "ops.py"
        assert record["source"]["sha256"] == digest
    parsed = read(manifest_path(root / package))
    assert parsed.in_place_project == str(root.resolve())
    assert {k.source.sha256 for k in parsed.kernels} == {digest}


def test_an_unchanged_tree_launches(project, fake_gpu):
    root, package = project
    ops = fresh_import(package)
    launch_vecadd(ops, fake_gpu)
    assert [launch.symbol for launch in fake_gpu.launches] == [ops.vecadd.manifest_record.symbol]


def test_an_edited_kernel_is_refused_before_anything_loads(project, fake_gpu):
    root, package = project
    add_alpha(root, package)
    ops = fresh_import(package)
    with pytest.raises(BuildtileError) as info:
        launch_vecadd(ops, fake_gpu)
    err = info.value
    assert err.code == "BT0620"
    text = str(err) + (err.help or "")
    assert f"kernel `{package}.ops.vecadd`" in text and "`fill`" in text
    assert str(root / package / "ops.py") in text and "out of date" in text
    assert f"buildtile build {root.resolve()}" in text and f"pip install -e {root.resolve()}" in text
    assert fake_gpu.loaded_images == [] and fake_gpu.launches == []


def test_a_changed_module_constant_makes_its_kernels_stale_too(project, fake_gpu):
    root, package = project
    edit(root, package, "SCALE = 1.0", "SCALE = 2.0")
    ops = fresh_import(package)
    with pytest.raises(BuildtileError, match=r"kernel `stale_kernels_\d+\.ops\.fill`"):
        ops.fill.signature


def test_rebuilding_in_place_makes_the_edited_kernel_launch(project, fake_gpu, capsys):
    root, package = project
    add_alpha(root, package)
    with pytest.raises(BuildtileError):
        fresh_import(package).vecadd.signature
    assert main(["build", str(root)]) == 0
    ops = fresh_import(package)
    assert [p.name for p in ops.vecadd.signature.params] == ["a", "b", "c", "alpha"]
    a, b, c = fake_gpu.array(64), fake_gpu.array(64), fake_gpu.array(64)
    ops.vecadd[(1,)](a, b, c, 0.5)
    assert len(fake_gpu.launches) == 1


def test_opting_in_rebuilds_a_stale_tree_on_first_use(project, fake_gpu, monkeypatch, capsys):
    root, package = project
    monkeypatch.setenv(freshness.REBUILD_ENV, "1")
    edit(root, package, "def fill(c: DisjointSlice[f32]):", "def fill(c: DisjointSlice[f32], n: i32):")
    edit(root, package, "from buildtile.types import DisjointSlice, Slice, f32",
         "from buildtile.types import DisjointSlice, Slice, f32, i32")
    ops = fresh_import(package)
    assert [p.name for p in ops.fill.signature.params] == ["c", "n"]
    assert "rebuilding" in capsys.readouterr().err
    digest = hashlib.sha256((root / package / "ops.py").read_bytes()).hexdigest()
    assert {k.source.sha256 for k in read(manifest_path(root / package)).kernels} == {digest}
    launch_vecadd(ops, fake_gpu)   # the other kernel of the module is fresh from the same rebuild
    assert len(fake_gpu.launches) == 1


def test_opting_in_without_the_compiler_refuses_and_says_why(project, fake_gpu, monkeypatch):
    root, package = project
    monkeypatch.setenv(freshness.REBUILD_ENV, "1")
    monkeypatch.setitem(sys.modules, "buildtile.compiler", None)   # a runtime-only install
    edit(root, package, "SCALE = 1.0", "SCALE = 3.0")
    ops = fresh_import(package)
    with pytest.raises(BuildtileError) as info:
        launch_vecadd(ops, fake_gpu)
    assert info.value.code == "BT0620"
    assert "the compiler is not installed" in str(info.value)
    assert "SCALE = 1.0" not in (root / package / "ops.py").read_text()


def test_each_module_is_hashed_once_per_process(project, fake_gpu, monkeypatch):
    root, package = project
    checks = []
    real = freshness.stale_module

    def counted(*args):
        checks.append(args[2])
        return real(*args)

    monkeypatch.setattr("buildtile.runtime.package.stale_module", counted)
    ops = fresh_import(package)
    for _ in range(3):
        launch_vecadd(ops, fake_gpu)
        ops.fill[(1,)](fake_gpu.array(8))
    assert checks == [f"{package}.ops"]


def test_an_installed_tree_is_never_compared_with_its_sources(project, fake_gpu, monkeypatch):
    root, package = project
    manifest = manifest_path(root / package)
    data = json.loads(manifest.read_text())
    del data["in_place"]                     # as a wheel installs it
    manifest.write_text(json.dumps(data))
    edit(root, package, "SCALE = 1.0", "SCALE = 4.0")
    monkeypatch.setattr("buildtile.runtime.package.stale_module",
                        lambda *args: pytest.fail("an installed package must not hash its sources"))
    ops = fresh_import(package)
    launch_vecadd(ops, fake_gpu)
    assert len(fake_gpu.launches) == 1


def test_a_tree_without_its_source_file_launches(project, fake_gpu):
    root, package = project
    ops = fresh_import(package)
    (root / package / "ops.py").unlink()     # only the compiled module is left
    launch_vecadd(ops, fake_gpu)
    assert len(fake_gpu.launches) == 1


# ----------------------------------------------------------------------------- the manifest fields

SOURCE = "from buildtile import simt\n\n@simt.kernel(block=256)\ndef k(out):\n    pass\n"
KERNELS = {"k": dict(params=[("out", "disjoint_slice", "f32")])}


def rewrite(ops, change) -> None:
    manifest = Path(ops.__file__).parent / "_buildtile" / "manifest.json"
    data = json.loads(manifest.read_text())
    change(data)
    manifest.write_text(json.dumps(data))


def test_a_manifest_from_before_source_hashes_still_launches(make_kernel_package, fake_gpu):
    ops = make_kernel_package(SOURCE, KERNELS)
    rewrite(ops, lambda data: data.update(in_place={"project": "/nonexistent"}))
    assert ops.k.manifest_record.source is None
    ops.k[1](fake_gpu.array(4))
    assert len(fake_gpu.launches) == 1


@pytest.mark.parametrize("source", [
    {"package_file": "../outside.py", "sha256": "0" * 64},
    {"package_file": "/abs/ops.py", "sha256": "0" * 64},
    {"package_file": "ops.py", "sha256": "not-hex"},
    {"package_file": "ops.py"},
])
def test_a_malformed_source_record_is_a_manifest_error(make_kernel_package, fake_gpu, source):
    ops = make_kernel_package(SOURCE, KERNELS)
    rewrite(ops, lambda data: data["kernels"][0]["source"].update(source))
    with pytest.raises(BuildtileError) as info:
        ops.k.signature
    assert info.value.code == "BT0621" and "source" in str(info.value)


@pytest.mark.parametrize("in_place", ["/proj", {"project": 3}, {}])
def test_a_malformed_in_place_record_is_a_manifest_error(make_kernel_package, fake_gpu, in_place):
    ops = make_kernel_package(SOURCE, KERNELS)
    rewrite(ops, lambda data: data.update(in_place=in_place))
    with pytest.raises(BuildtileError) as info:
        ops.k.signature
    assert info.value.code == "BT0621" and "in_place" in str(info.value)
