"""Hand-made packages for the C ABI tests: manifests, PTX written by hand, cubins; and what
every C ABI test drives them with: the shim and tests/fake_libcuda.c compiled, DLPack tensors
and launch configurations as ctypes sees them, the shim's launchers typed.

The PTX kernels follow kernel ABI v1 exactly as the SIMT backend's output
must (slice = pointer + length, tensor = pointer + shape + strides), so the
shim can be tested, on a GPU too, without the compiler.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

from buildtile.interop.abi import DTYPES, kernel_params
from buildtile.interop.driver_compat import min_driver_for, ptx_isa_of

PACKAGE = "example_kernels"
HERE = Path(__file__).parent
CC = shutil.which("cc") or shutil.which("gcc")
CXX = shutil.which("c++") or shutil.which("g++")
WARNINGS = ["-Wall", "-Wextra", "-Werror"]

_HEADER = """.version 8.0
.target sm_80
.address_size 64
"""

# c[i] = a[i] + b[i] for i < len(c); 1-D blocks of 256
VECADD_PTX = _HEADER + """
.visible .entry example_kernels_ops__vecadd(
    .param .u64 a_data, .param .u64 a_len,
    .param .u64 b_data, .param .u64 b_len,
    .param .u64 c_data, .param .u64 c_len
)
.reqntid 256, 1, 1
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [a_data];
    ld.param.u64 %rd2, [b_data];
    ld.param.u64 %rd3, [c_data];
    ld.param.u64 %rd4, [c_len];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd5, %r1, %r2;
    cvt.u64.u32 %rd6, %r3;
    add.s64 %rd5, %rd5, %rd6;
    setp.ge.s64 %p1, %rd5, %rd4;
    @%p1 bra $L_done;
    shl.b64 %rd7, %rd5, 2;
    cvta.to.global.u64 %rd8, %rd1;
    add.s64 %rd8, %rd8, %rd7;
    ld.global.f32 %f1, [%rd8];
    cvta.to.global.u64 %rd9, %rd2;
    add.s64 %rd9, %rd9, %rd7;
    ld.global.f32 %f2, [%rd9];
    add.rn.f32 %f3, %f1, %f2;
    cvta.to.global.u64 %rd10, %rd3;
    add.s64 %rd10, %rd10, %rd7;
    st.global.f32 [%rd10], %f3;
$L_done:
    ret;
}
"""

# out[i] = alpha * x[i] + y[i] (one fused multiply-add); 1-D blocks of 256
SAXPY_PTX = _HEADER + """
.visible .entry example_kernels_ops__saxpy(
    .param .f32 alpha,
    .param .u64 x_data, .param .u64 x_len,
    .param .u64 y_data, .param .u64 y_len,
    .param .u64 out_data, .param .u64 out_len
)
.reqntid 256, 1, 1
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<12>;
    ld.param.f32 %f4, [alpha];
    ld.param.u64 %rd1, [x_data];
    ld.param.u64 %rd2, [y_data];
    ld.param.u64 %rd3, [out_data];
    ld.param.u64 %rd4, [out_len];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd5, %r1, %r2;
    cvt.u64.u32 %rd6, %r3;
    add.s64 %rd5, %rd5, %rd6;
    setp.ge.s64 %p1, %rd5, %rd4;
    @%p1 bra $L_done;
    shl.b64 %rd7, %rd5, 2;
    cvta.to.global.u64 %rd8, %rd1;
    add.s64 %rd8, %rd8, %rd7;
    ld.global.f32 %f1, [%rd8];
    cvta.to.global.u64 %rd9, %rd2;
    add.s64 %rd9, %rd9, %rd7;
    ld.global.f32 %f2, [%rd9];
    fma.rn.f32 %f3, %f4, %f1, %f2;
    cvta.to.global.u64 %rd10, %rd3;
    add.s64 %rd10, %rd10, %rd7;
    st.global.f32 [%rd10], %f3;
$L_done:
    ret;
}
"""

# c[row, col] = a[row, col] + b[row, col], strides in elements; row from y,
# col from x; blocks of 16 x 16
MATADD_PTX = _HEADER + """
.visible .entry example_kernels_ops__matadd(
    .param .u64 a_data, .param .u64 a_s0, .param .u64 a_s1, .param .u64 a_t0, .param .u64 a_t1,
    .param .u64 b_data, .param .u64 b_s0, .param .u64 b_s1, .param .u64 b_t0, .param .u64 b_t1,
    .param .u64 c_data, .param .u64 c_s0, .param .u64 c_s1, .param .u64 c_t0, .param .u64 c_t1
)
.reqntid 16, 16, 1
{
    .reg .pred %p<4>;
    .reg .b32 %r<7>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<24>;
    ld.param.u64 %rd1, [a_data];
    ld.param.u64 %rd2, [a_t0];
    ld.param.u64 %rd3, [a_t1];
    ld.param.u64 %rd4, [b_data];
    ld.param.u64 %rd5, [b_t0];
    ld.param.u64 %rd6, [b_t1];
    ld.param.u64 %rd7, [c_data];
    ld.param.u64 %rd8, [c_s0];
    ld.param.u64 %rd9, [c_s1];
    ld.param.u64 %rd10, [c_t0];
    ld.param.u64 %rd11, [c_t1];
    mov.u32 %r1, %ctaid.y;
    mov.u32 %r2, %ntid.y;
    mov.u32 %r3, %tid.y;
    mul.wide.u32 %rd12, %r1, %r2;
    cvt.u64.u32 %rd13, %r3;
    add.s64 %rd12, %rd12, %rd13;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r6, %tid.x;
    mul.wide.u32 %rd14, %r4, %r5;
    cvt.u64.u32 %rd15, %r6;
    add.s64 %rd14, %rd14, %rd15;
    setp.ge.s64 %p1, %rd12, %rd8;
    setp.ge.s64 %p2, %rd14, %rd9;
    or.pred %p3, %p1, %p2;
    @%p3 bra $L_done;
    mul.lo.s64 %rd16, %rd12, %rd2;
    mad.lo.s64 %rd16, %rd14, %rd3, %rd16;
    shl.b64 %rd16, %rd16, 2;
    cvta.to.global.u64 %rd17, %rd1;
    add.s64 %rd17, %rd17, %rd16;
    ld.global.f32 %f1, [%rd17];
    mul.lo.s64 %rd18, %rd12, %rd5;
    mad.lo.s64 %rd18, %rd14, %rd6, %rd18;
    shl.b64 %rd18, %rd18, 2;
    cvta.to.global.u64 %rd19, %rd4;
    add.s64 %rd19, %rd19, %rd18;
    ld.global.f32 %f2, [%rd19];
    add.rn.f32 %f3, %f1, %f2;
    mul.lo.s64 %rd20, %rd12, %rd10;
    mad.lo.s64 %rd20, %rd14, %rd11, %rd20;
    shl.b64 %rd20, %rd20, 2;
    cvta.to.global.u64 %rd21, %rd7;
    add.s64 %rd21, %rd21, %rd20;
    st.global.f32 [%rd21], %f3;
$L_done:
    ret;
}
"""


def _length(param: str) -> dict:
    return {"op": "len", "param": param}


def _shape(param: str, axis: int) -> dict:
    return {"op": "shape", "param": param, "axis": axis}


def _eq(lhs: dict, rhs: dict) -> dict:
    return {"op": "cmp", "fn": "==", "lhs": lhs, "rhs": rhs}


def _slice(name: str, kind: str = "slice", dtype: str = "f32") -> dict:
    role = {"slice": "in", "disjoint_slice": "out", "atomic_slice": "inout"}[kind]
    return {"name": name, "kind": kind, "dtype": dtype, "rank": 1, "role": role}


def _tensor(name: str, rank: int, kind: str = "tensor", dtype: str = "f32") -> dict:
    return {"name": name, "kind": kind, "dtype": dtype, "rank": rank,
            "role": "in" if kind == "tensor" else "out"}


def _scalar(name: str, dtype: str) -> dict:
    return {"name": name, "kind": "scalar", "dtype": dtype, "rank": 0, "role": "in"}


def _contract(block, index_dims, requires):
    return {
        "block": block,
        "index_dims": index_dims,
        "min_blocks": None,
        "dynamic_shared": 0,
        "min_compute_capability": None,
        "requires": [{"text": text, "expr": expr} for text, expr in requires],
    }


def _kernel(name: str, params: list[dict], contract: dict, module: str = "example_kernels.ops") -> dict:
    return {
        "name": name,
        "module": module,
        "symbol": module.replace(".", "_") + "__" + name,
        "kind": "simt",
        "source": {"file": module.replace(".", "/") + ".py", "line": 1},
        "params": params,
        "contract": contract,
    }


def example_kernels() -> list[tuple[dict, str]]:
    """vecadd, saxpy and matadd of example_project, each with its PTX."""
    vecadd = _kernel(
        "vecadd",
        [_slice("a"), _slice("b"), _slice("c", "disjoint_slice")],
        _contract([256, 1, 1], 1, [
            ("len(a) == len(c)", _eq(_length("a"), _length("c"))),
            ("len(b) == len(c)", _eq(_length("b"), _length("c"))),
        ]),
    )
    saxpy = _kernel(
        "saxpy",
        [_scalar("alpha", "f32"), _slice("x"), _slice("y"), _slice("out", "disjoint_slice")],
        _contract([256, 1, 1], 1, [
            ("len(x) == len(out)", _eq(_length("x"), _length("out"))),
            ("len(y) == len(out)", _eq(_length("y"), _length("out"))),
        ]),
    )
    matadd = _kernel(
        "matadd",
        [_tensor("a", 2), _tensor("b", 2), _tensor("c", 2, "disjoint_tensor")],
        _contract([16, 16, 1], 2, [
            (f"{x}.shape[{axis}] == c.shape[{axis}]", _eq(_shape(x, axis), _shape("c", axis)))
            for x in ("a", "b") for axis in (0, 1)
        ]),
    )
    return [(vecadd, VECADD_PTX), (saxpy, SAXPY_PTX), (matadd, MATADD_PTX)]


def extra_kernels() -> list[tuple[dict, str]]:
    """Kernels for the CPU tests only (their images are never run)."""
    fill = _kernel(
        "fill_unsafe_demo",
        [_slice("x", "disjoint_slice"), _scalar("n", "i64"), _scalar("flag", "bool"), _scalar("h", "f16")],
        _contract(None, 1, [("n >= 0", {"op": "cmp", "fn": ">=", "lhs": {"op": "param", "name": "n"},
                                         "rhs": {"op": "const", "value": 0}})]),
        module="example_kernels.misc",
    )
    histogram = _kernel(
        "histogram",
        [_slice("values", dtype="i32"), _slice("bins", "atomic_slice", dtype="u32"), _scalar("nbins", "i32")],
        _contract([128, 1, 1], 1, [
            ("len(bins) == nbins", _eq(_length("bins"), {"op": "param", "name": "nbins"})),
            ("len(values) // 2 >= 1",
             {"op": "cmp", "fn": ">=", "rhs": {"op": "const", "value": 1},
              "lhs": {"op": "bin", "fn": "//", "lhs": _length("values"), "rhs": {"op": "const", "value": 2}}}),
        ]),
        module="example_kernels.misc",
    )
    scale3d = _kernel(
        "scale3d",
        [_tensor("x", 3), _tensor("y", 3, "disjoint_tensor"), _scalar("s", "f64")],
        {**_contract([8, 8, 4], 3, []), "min_compute_capability": "8.0", "dynamic_shared": 1024},
        module="example_kernels.misc",
    )
    return [(fill, VECADD_PTX), (histogram, VECADD_PTX), (scale3d, VECADD_PTX)]


def link_cubin(ptx: str, target: str) -> bytes | None:
    """The cubin nvJitLink makes of ``ptx`` for ``target``; None without nvJitLink."""
    try:
        from cuda.bindings import nvjitlink
    except ImportError:
        return None
    data = ptx.encode()
    handle = nvjitlink.create(1, [f"-arch={target}"])
    try:
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        nvjitlink.complete(handle)
        out = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, out)
    finally:
        nvjitlink.destroy(handle)
    return bytes(out)


def fake_cubin(ptx: str, target: str) -> bytes:
    """Bytes that stand in for a cubin where nobody runs it (ELF magic, then a tag)."""
    return b"\x7fELF" + f"fake cubin for {target}\n".encode() + hashlib.sha256(ptx.encode()).digest()


def write_package(
    root: Path,
    kernels: list[tuple[dict, str]],
    *,
    targets: tuple[str, ...] = ("sm_80", "sm_90"),
    ptx: bool = True,
    real_cubins: bool = False,
    package_version: str | None = "0.1.0",
    records: dict | None = None,
) -> dict:
    """Lay out ``root/<package>/_buildtile`` (manifest and artifacts) as a build would (``records``:
    the manifest's record layouts, by name)."""
    out = root / PACKAGE / "_buildtile"
    (out / "kernels").mkdir(parents=True, exist_ok=True)
    (root / PACKAGE / "__init__.py").write_text("")
    manifest = {
        "manifest_version": 1,
        "abi_version": 1,
        "package": PACKAGE,
        "buildtile_version": "0.1.0",
        "targets": list(targets),
        "ptx_target": _lowest(targets) if ptx else None,
        "checks": "release",
        "kernels": [],
    }
    if package_version:
        manifest["package_version"] = package_version
    if records:
        manifest["records"] = records
    for record, text in kernels:
        record = json.loads(json.dumps(record))
        artifacts = {}
        for target in targets:
            data = (link_cubin(text, target) if real_cubins else None) or fake_cubin(text, target)
            artifacts[target] = _artifact(out, f"kernels/{record['symbol']}.{target}.cubin", data, "cubin",
                                          ptx_isa_of(text))
        if ptx:
            lowest = _lowest(targets)
            artifacts["ptx"] = _artifact(out, f"kernels/{record['symbol']}.{lowest}.ptx", text.encode(), "ptx",
                                         ptx_isa_of(text))
            artifacts["ptx"]["target"] = lowest
        record["artifacts"] = artifacts
        manifest["kernels"].append(record)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def _lowest(targets: tuple[str, ...]) -> str:
    return min(targets, key=lambda t: int(t[3:].rstrip("af")))


def _artifact(out: Path, rel: str, data: bytes, kind: str, isa: str | None) -> dict:
    """An image as a build records it; each is held to the PTX ISA of the kernels' text (``isa``)."""
    (out / rel).write_bytes(data)
    return {"kind": kind, "path": rel, "sha256": hashlib.sha256(data).hexdigest(),
            "ptx_isa": isa, "min_driver": min_driver_for(isa)}


# --------------------------------------------------------------------------
# DLPack and launch configuration, as ctypes sees them


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class LaunchConfig(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint32 * 3), ("shared_mem", ctypes.c_uint32), ("stream", ctypes.c_void_p)]


def tensor(data, shape, dtype="f32", *, strides=None, device=(2, 0), byte_offset=0, lanes=1):
    """A DLTensor over ``data`` (it keeps its shape and strides arrays alive)."""
    _, code, bits, _ = DTYPES[dtype]
    t = DLTensor()
    t.data = data
    t.device = DLDevice(*device)
    t.ndim = len(shape)
    t.dtype = DLDataType(code, bits, lanes)
    t._shape = (ctypes.c_int64 * len(shape))(*shape)
    t.shape = ctypes.cast(t._shape, ctypes.POINTER(ctypes.c_int64))
    if strides is not None:
        t._strides = (ctypes.c_int64 * len(strides))(*strides)
        t.strides = ctypes.cast(t._strides, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = byte_offset
    return t


def config(*grid, shared=0, stream=None):
    return LaunchConfig((ctypes.c_uint32 * 3)(*(list(grid) + [1, 1])[:3]), shared, stream)


_CTYPES = {
    "bool": ctypes.c_bool, "i32": ctypes.c_int32, "i64": ctypes.c_int64, "u32": ctypes.c_uint32,
    "u64": ctypes.c_uint64, "f16": ctypes.c_uint16, "bf16": ctypes.c_uint16,
    "f32": ctypes.c_float, "f64": ctypes.c_double,
}


class Shim:
    """A loaded copy of the shim library with typed launchers (``shim.vecadd(cfg, a, b, c)``)."""

    def __init__(self, path: Path, manifest: dict) -> None:
        self.lib = ctypes.CDLL(str(path))
        self.lib.example_kernels_last_error.restype = ctypes.c_char_p
        self.lib.example_kernels_abi_version.restype = ctypes.c_int
        self.kernels = {k["name"]: k for k in manifest["kernels"]}
        for k in manifest["kernels"]:
            unsafe = k["contract"]["block"] is None
            fn = getattr(self.lib, "bt_" + k["symbol"] + ("_unsafe" if unsafe else ""))
            args = [ctypes.POINTER(LaunchConfig)] + ([ctypes.POINTER(ctypes.c_uint32 * 3)] if unsafe else [])
            args += [_CTYPES[p["dtype"]] if p["kind"] == "scalar" else ctypes.POINTER(DLTensor) for p in k["params"]]
            fn.argtypes, fn.restype = args, ctypes.c_int
            setattr(self, k["name"], self._caller(fn))

    @staticmethod
    def _caller(fn):
        def call(cfg, *args):
            def ref(x):
                return None if x is None else ctypes.byref(x) if isinstance(x, (DLTensor, LaunchConfig)) else x
            return fn(ref(cfg), *(ref(a) for a in args))
        return call

    @property
    def last_error(self) -> str:
        return self.lib.example_kernels_last_error().decode()


class FakeState(ctypes.Structure):
    _fields_ = [
        ("cc_major", ctypes.c_int), ("cc_minor", ctypes.c_int), ("device_count", ctypes.c_int),
        ("init_result", ctypes.c_int), ("refuse_cubin", ctypes.c_int), ("refuse_ptx", ctypes.c_int),
        ("param_count", ctypes.c_int), ("param_sizes", ctypes.c_int * 32),
        ("module_loads", ctypes.c_int), ("last_image", ctypes.c_void_p), ("primary_retains", ctypes.c_int),
        ("launches", ctypes.c_int), ("function", ctypes.c_char * 128),
        ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
        ("stream", ctypes.c_void_p), ("set_attribute_value", ctypes.c_int),
        ("params", (ctypes.c_uint8 * 8) * 32), ("pushes", ctypes.c_int),
    ]


def fresh_fake_driver(path, monkeypatch, *, devices: int):
    """The fake driver, reset: ``devices`` devices of compute capability 9.0, device 0 current."""
    monkeypatch.setenv("BUILDTILE_LIBCUDA", str(path))
    driver = ctypes.CDLL(str(path))
    state = FakeState.in_dll(driver, "fake")
    state.cc_major, state.cc_minor, state.device_count = 9, 0, devices
    state.init_result = state.refuse_cubin = state.refuse_ptx = 0
    driver.fake_reset_observations()
    driver.fake_make_current(0, 1)
    return driver, state


def expect_params(state, kernel: dict) -> list[int | float | bytes]:
    """Tell the fake driver the parameter sizes of ``kernel`` (from abi.kernel_params)."""
    sizes = {"ptr": 8, "i64": 8, "u64": 8, "f64": 8, "i32": 4, "u32": 4, "f32": 4, "f16": 2, "bf16": 2, "bool": 1}
    flat = kernel_params(kernel["params"])
    state.param_count = len(flat)
    for i, p in enumerate(flat):
        state.param_sizes[i] = sizes[p.ctype]
    return flat


def param_int(state, i: int) -> int:
    return int.from_bytes(bytes(state.params[i]), "little", signed=True)


# --------------------------------------------------------------------------
# Building the shim and the fake driver


def run(cmd, **kwargs):
    result = subprocess.run([str(c) for c in cmd], check=False, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))}\n{result.stdout}\n{result.stderr}"
    return result


def compile_shim(project: Path, out: Path) -> Path:
    """The shim library of an emitted C ABI ``project``, compiled as its CMake project would be."""
    run([CC, "-std=c11", *WARNINGS, "-Wpedantic", "-O1", "-fPIC", "-shared", "-fvisibility=hidden",
         "-I", project / "include", "-I", project / "src",
         *sorted((project / "src").glob("*.c")), "-o", out, "-ldl", "-lpthread"])
    return out


def compile_fake_driver(out: Path) -> Path:
    """tests/fake_libcuda.c as the ``libcuda.so.1`` the shim opens (through BUILDTILE_LIBCUDA)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    run([CC, "-std=c11", *WARNINGS, "-fPIC", "-shared", HERE / "fake_libcuda.c", "-o", out])
    return out


class CompiledPackage(NamedTuple):
    """A hand-made package with its C ABI emitted and compiled, and the fake driver to run it on
    (a NamedTuple: tests/gpu loads this module by path, where dataclasses cannot find it)."""

    root: Path          # holds <package>/_buildtile
    manifest: dict
    project: Path       # the emitted CMake project of the shim
    shim: Path          # the compiled shim library
    driver: Path        # tests/fake_libcuda.c, compiled

    @property
    def include(self) -> Path:
        return self.root / PACKAGE / "_buildtile" / "include"


def compiled_package(root: Path, kernels: list[tuple[dict, str]], **kwargs) -> CompiledPackage:
    """A package of ``kernels`` laid out under ``root`` (``kwargs``: those of :func:`write_package`),
    its C ABI emitted and its shim compiled, with the fake driver."""
    from buildtile.config import BuildtileSettings
    from buildtile.interop.c_abi import emit

    manifest = write_package(root, kernels, **kwargs)
    project = emit(manifest, root / PACKAGE / "_buildtile", root / "build", BuildtileSettings()).cmake_source_dir
    return CompiledPackage(root, manifest, project, compile_shim(project, project.parent / "libshim.so"),
                           compile_fake_driver(root / "fake" / "libcuda.so.1"))


def fake_shim(package: CompiledPackage, tmp_path: Path, monkeypatch, *, devices: int = 1):
    """(shim, driver library, driver state): a fresh copy of ``package``'s shim (its own driver state
    and last error) over a reset fake driver (see :func:`fresh_fake_driver`)."""
    driver, state = fresh_fake_driver(package.driver, monkeypatch, devices=devices)
    copied = tmp_path / "libshim.so"
    shutil.copy(package.shim, copied)
    return Shim(copied, package.manifest), driver, state
