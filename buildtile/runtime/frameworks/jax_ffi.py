"""SIMT kernels inside ``jax.jit``: XLA custom calls through JAX's FFI, over the package's C ABI.

A package built with ``[tool.buildtile.jax] ffi = true`` (which needs the C ABI) ships
``_buildtile/jax/ffi.cc``: an XLA FFI handler per contracted SIMT kernel that calls the
kernel's C launcher, with its checks, on XLA's stream. On first use this module compiles it
with the system C++ compiler (``$CXX``, else ``c++``) against the header jaxlib ships
(``jax.ffi.include_dir()``) and the package's shim library, once per package build and
jaxlib (the library is kept under the user cache, ``$XDG_CACHE_HOME/buildtile/jax-ffi``), and
registers the handlers with ``jax.ffi.register_ffi_target`` for the CUDA platform::

    from buildtile.runtime.frameworks.jax_ffi import ffi_kernel
    vecadd = ffi_kernel(ops.vecadd)

    @jax.jit
    def f(a, b):
        c = vecadd(ops.vecadd.grid_for(a.shape[0]), a, b, jnp.empty_like(a))
        return c * 2

``ffi_kernel(kernel)(grid, *args)`` takes the kernel's arguments in declaration order (arrays
as JAX arrays, scalars as Python numbers, which become static attributes of the call) and
returns the arrays the kernel writes, as new JAX arrays (one array for one output, else a
tuple): each output is aliased to its argument (``input_output_aliases``), so an
``AtomicSlice`` starts from its argument's values and XLA may reuse the argument's buffer.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from buildtile.errors import BuildtileError, TypeMismatchError
from buildtile.interop import layout
from buildtile.interop.manifest import KernelRecord
from buildtile.runtime.frameworks import array_mismatch, read_frameworks

#: the handlers' source, under the package's ``_buildtile`` folder
FFI_SOURCE = "jax/ffi.cc"

#: scalar dtype -> the NumPy type its FFI attribute is given as (XLA attributes have no f16/bf16)
ATTRIBUTE_TYPES = {
    "bool": "bool_", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "f32": "float32", "f64": "float64",
}

_lock = threading.Lock()
_libraries: dict[str, ctypes.CDLL] = {}     # package name -> its loaded handler library
_targets: set[str] = set()                  # registered FFI target names


def handler_name(symbol: str) -> str:
    """The exported symbol of the handler of the kernel whose PTX entry is ``symbol``."""
    return f"bt_{symbol}_ffi"


def target_name(package: str, record: KernelRecord) -> str:
    """The FFI target a kernel is registered as: ``<package>.<module path>.<kernel>``."""
    return f"{package}.{record.module.partition('.')[2] or record.module}.{record.name}"


def takes_ffi(record: KernelRecord) -> bool:
    """Whether ``record`` has a handler: a SIMT kernel with a contract and FFI-typed scalars."""
    return (record.kind == "simt" and record.contract.block is not None
            and all(p.dtype in ATTRIBUTE_TYPES for p in record.params if p.is_scalar))


def compile_handlers(artifact_dir: Path, package: str, out: Path) -> None:
    """Compile ``artifact_dir``'s handlers into the shared library ``out``."""
    import jax.ffi

    source = artifact_dir / FFI_SOURCE
    lib_dir = artifact_dir / layout.LIB_DIR
    compiler = os.environ.get("CXX") or shutil.which("c++") or "c++"
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
        built = Path(scratch) / out.name
        command = [compiler, "-std=c++17", "-O2", "-shared", "-fPIC", "-isystem", str(jax.ffi.include_dir()),
                   f"-I{artifact_dir / layout.INCLUDE_DIR}", str(source), f"-L{lib_dir}",
                   f"-l:{layout.library_filename(package)}", f"-Wl,-rpath,{lib_dir}", "-o", str(built)]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        except OSError as exc:
            raise BuildtileError(f"cannot compile the XLA FFI handlers of package `{package}`: {exc}",
                                 code="BT0620", help="install a C++ compiler, or point $CXX at one") from None
        if result.returncode != 0:
            raise BuildtileError(
                f"compiling the XLA FFI handlers of package `{package}` failed:\n{result.stderr[-2000:]}",
                code="BT0620", help="the handlers need a C++17 compiler and the header jaxlib ships")
        os.replace(built, out)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "buildtile" / "jax-ffi"


def handler_library(package) -> ctypes.CDLL:
    """The loaded handler library of ``package`` (a PackageRuntime), compiled on first use."""
    import jaxlib

    with _lock:
        library = _libraries.get(package.name)
        if library is not None:
            return library
        artifact_dir = Path(package.artifact_dir)
        if not read_frameworks(artifact_dir).get("jax", {}).get("ffi") or not (artifact_dir / FFI_SOURCE).is_file():
            raise BuildtileError(
                f"package `{package.name}` was built without XLA FFI handlers",
                code="BT0620",
                help="add `[tool.buildtile.jax] ffi = true` (and `[tool.buildtile.c-abi] enabled = true`) "
                     "to its pyproject.toml and rebuild it",
            )
        shim = artifact_dir / layout.LIB_DIR / layout.library_filename(package.name)
        key = hashlib.sha256()
        key.update((artifact_dir / FFI_SOURCE).read_bytes())
        key.update(str(shim.resolve()).encode())
        key.update(jaxlib.__version__.encode())
        out = _cache_dir() / key.hexdigest()[:24] / f"lib{package.name}_jax_ffi.so"
        if not out.is_file():
            compile_handlers(artifact_dir, package.name, out)
        library = _libraries[package.name] = ctypes.CDLL(str(out))
        return library


def register(handle) -> str:
    """Register ``handle``'s handler with JAX (once); returns its FFI target name."""
    import jax.ffi

    record = handle.manifest_record
    package = handle.package
    if not takes_ffi(record):
        raise BuildtileError(
            f"kernel `{record.name}` has no XLA FFI handler: only SIMT kernels with a launch contract "
            "and no f16/bf16 scalars have one",
            code="BT0600",
        )
    name = target_name(package.name, record)
    library = handler_library(package)
    with _lock:
        if name not in _targets:
            handler = getattr(library, handler_name(record.symbol))
            jax.ffi.register_ffi_target(name, _capsule(handler), platform="CUDA")
            _targets.add(name)
    return name


def _capsule(function) -> object:
    """A PyCapsule of ``function``'s address, as ``register_ffi_target`` takes. Made with ctypes
    function objects of our own: ``jax.ffi.pycapsule`` retypes the ``PyCapsule_New`` of
    ``ctypes.pythonapi``, which every other user of it in the process shares."""
    new = ctypes.PyDLL(None).PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    return new(ctypes.cast(function, ctypes.c_void_p).value, None, None)


def ffi_kernel(handle) -> Callable:
    """``handle`` (a SIMT kernel) as a function JAX can trace: ``f(grid, *args)`` (module docstring)."""
    import jax
    import numpy as np

    target = register(handle)
    record = handle.manifest_record
    arrays = [p for p in record.params if p.is_array]
    written = [p for p in arrays if p.writes]
    scalars = [p for p in record.params if p.is_scalar]
    aliases = {arrays.index(p): k for k, p in enumerate(written)}

    def call(grid, *args):
        if len(args) != len(record.params):
            raise TypeMismatchError(f"kernel `{record.name}` takes {len(record.params)} arguments, got {len(args)}")
        for p in arrays:
            error = array_mismatch(record.name, p, str(args[p.index].dtype), tuple(args[p.index].shape), "array")
            if error is not None:
                raise error
        extents = (grid,) if isinstance(grid, int) else tuple(grid)
        attributes = {p.name: getattr(np, ATTRIBUTE_TYPES[p.dtype])(args[p.index]) for p in scalars}
        results = [jax.ShapeDtypeStruct(args[p.index].shape, args[p.index].dtype) for p in written]
        out = jax.ffi.ffi_call(target, results, input_output_aliases=aliases)(
            *(args[p.index] for p in arrays), grid=np.asarray(extents, dtype=np.int64), **attributes)
        return out[0] if len(written) == 1 else tuple(out)

    call.__name__ = record.name
    return call

