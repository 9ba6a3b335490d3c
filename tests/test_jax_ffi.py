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
from buildtile.interop.jax_ffi import FFI_SOURCE, ffi_kernels, generate_ffi_source, handler_name
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
        assert f"XLA_FFI_DEFINE_HANDLER_SYMBOL({handler_name(kernel)}," in source


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
