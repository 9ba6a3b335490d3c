"""JAX: the generated XLA FFI handlers compile against the header jaxlib ships, and the emitter
writes them (and the frameworks record) for a package that opts in. The handlers run inside
``jax.jit`` on the GPU in tests/gpu/test_jax.py."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

import c_abi_support as support
from buildtile.config import BuildtileSettings, JaxSettings, TorchSettings
from buildtile.interop.c_abi import emit as emit_c_abi
from buildtile.interop.c_model import read_package
from buildtile.interop.frameworks import emit as emit_frameworks
from buildtile.interop.jax_ffi import ffi_kernels, generate_ffi_source
from buildtile.runtime.frameworks.jax_ffi import FFI_SOURCE, handler_name
from buildtile.runtime.frameworks import FRAMEWORKS_FILE, read_frameworks

PKG = support.PACKAGE


@pytest.fixture
def package(tmp_path):
    root = tmp_path / "site"
    manifest = support.write_package(root, support.example_kernels() + support.extra_kernels())
    settings = BuildtileSettings(torch=TorchSettings(ops=True), jax=JaxSettings(ffi=True))
    settings.c_abi.enabled = True
    out = root / PKG / "_buildtile"
    emit_c_abi(manifest, out, tmp_path / "build", settings)
    emit_frameworks(manifest, out, tmp_path / "build", settings)
    return manifest, out


def test_the_emitter_records_the_opt_ins_and_writes_the_handlers(package):
    manifest, out = package
    assert read_frameworks(out) == {"torch": {"ops": True}, "jax": {"ffi": True}}
    assert json.loads((out / FRAMEWORKS_FILE).read_text())["jax"]["ffi"] is True
    source = (out / FFI_SOURCE).read_text()
    for kernel in ffi_kernels(read_package(manifest, out)):
        assert f"XLA_FFI_DEFINE_HANDLER_SYMBOL({handler_name(kernel.symbol)}," in source


def test_handlers_cover_the_contracted_simt_kernels_with_ffi_scalars(package):
    manifest, out = package
    names = {k.name for k in ffi_kernels(read_package(manifest, out))}
    assert {"vecadd", "saxpy", "matadd"} <= names
    assert "fill_unsafe_demo" not in names   # no contract (and an f16 scalar XLA attributes lack)


def test_the_handlers_compile_against_the_xla_ffi_header(package, tmp_path):
    jax_ffi = pytest.importorskip("jax.ffi")
    compiler = shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    manifest, out = package
    source = tmp_path / "ffi.cc"
    source.write_text(generate_ffi_source(read_package(manifest, out)))
    result = subprocess.run(
        [compiler, "-std=c++17", "-fsyntax-only", "-Wall", "-Werror", "-isystem", str(jax_ffi.include_dir()),
         f"-I{out / 'include'}", str(source)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]


# ----------------------------------------------------------------------------- the runtime side

OPS_SOURCE = """\
from buildtile import simt

@simt.kernel
def vecadd(a, b, c):
    pass

@simt.kernel
def saxpy(alpha, x, y, out):
    pass
"""


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The package of :func:`package` importable, with its C ABI's launchers as stand-ins that
    link (a shim library whose every launcher returns success) and handlers compiled from it."""
    pytest.importorskip("jax")
    compiler = shutil.which("cc")
    if compiler is None or shutil.which("c++") is None:
        pytest.skip("no C and C++ compiler")
    import sys

    from buildtile.interop import layout
    from buildtile.runtime.package import forget_package

    root = tmp_path / "site"
    manifest = support.write_package(root, support.example_kernels())
    settings = BuildtileSettings(jax=JaxSettings(ffi=True))
    settings.c_abi.enabled = True
    out = root / PKG / "_buildtile"
    emit_c_abi(manifest, out, tmp_path / "build", settings)
    emit_frameworks(manifest, out, tmp_path / "build", settings)
    stub = tmp_path / "shim.c"
    stub.write_text("".join(f"int bt_{k['symbol']}(void) {{ return 0; }}\n" for k in manifest["kernels"])
                    + f'const char* {PKG}_last_error(void) {{ return ""; }}\n')
    (out / layout.LIB_DIR).mkdir()
    subprocess.run([compiler, "-shared", "-fPIC", str(stub), "-o", str(out / layout.LIB_DIR / layout.library_filename(PKG))],
                   check=True, timeout=120)
    (root / PKG / "ops.py").write_text(OPS_SOURCE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(root))
    for name in [m for m in sys.modules if m == PKG or m.startswith(PKG + ".")]:
        monkeypatch.delitem(sys.modules, name)
    forget_package(PKG)
    import importlib

    yield importlib.import_module(f"{PKG}.ops"), tmp_path / "cache"
    forget_package(PKG)
    for name in [m for m in sys.modules if m == PKG or m.startswith(PKG + ".")]:
        del sys.modules[name]


def test_handlers_compile_once_register_and_trace(installed):
    import jax
    import jax.numpy as jnp

    from buildtile.runtime.frameworks.jax_ffi import ffi_kernel

    ops, cache = installed
    vecadd = ffi_kernel(ops.vecadd)
    (library,) = cache.glob("buildtile/jax-ffi/*/lib*_jax_ffi.so")
    assert ffi_kernel(ops.vecadd) is not None and list(cache.glob("buildtile/jax-ffi/*/*.so")) == [library]
    saxpy = ffi_kernel(ops.saxpy)

    def f(a, b):
        c = vecadd((4,), a, b, jnp.empty_like(a))
        return saxpy(4, 2.0, c, b, jnp.empty_like(a)) * 2

    shape = jax.eval_shape(f, jax.ShapeDtypeStruct((1000,), jnp.float32), jax.ShapeDtypeStruct((1000,), jnp.float32))
    assert (shape.shape, shape.dtype) == ((1000,), jnp.float32)


def test_arguments_of_the_wrong_dtype_or_rank_are_refused_while_tracing(installed):
    import jax
    import jax.numpy as jnp

    from buildtile.errors import TypeMismatchError
    from buildtile.runtime.frameworks.jax_ffi import ffi_kernel

    ops, _ = installed
    vecadd = ffi_kernel(ops.vecadd)
    f32, f64 = jax.ShapeDtypeStruct((8,), jnp.float32), jax.ShapeDtypeStruct((8,), jnp.int32)
    with pytest.raises(TypeMismatchError, match=r"`vecadd` parameter `b` expects Slice\[f32\]"):
        jax.eval_shape(lambda a, b: vecadd((1,), a, b, a), f32, f64)
    with pytest.raises(TypeMismatchError, match="takes 3 arguments, got 2"):
        jax.eval_shape(lambda a: vecadd((1,), a, a), f32)


def test_a_package_without_handlers_says_how_to_get_them(installed):
    from buildtile.errors import BuildtileError
    from buildtile.runtime.frameworks import FRAMEWORKS_FILE
    from buildtile.runtime.frameworks import jax_ffi

    ops, _ = installed
    (ops.vecadd.package.artifact_dir / FRAMEWORKS_FILE).unlink()
    jax_ffi._libraries.pop(PKG, None)
    with pytest.raises(BuildtileError, match=r"built without XLA FFI handlers") as info:
        jax_ffi.ffi_kernel(ops.vecadd)
    assert "ffi = true" in info.value.help


def test_the_handlers_need_the_c_abi(tmp_path):
    from buildtile.errors import ConfigError

    settings = BuildtileSettings(jax=JaxSettings(ffi=True))
    with pytest.raises(ConfigError, match=r"jax.ffi needs the C ABI") as info:
        emit_frameworks({"kernels": []}, tmp_path, tmp_path / "build", settings)
    assert "[tool.buildtile.c-abi]" in info.value.help
