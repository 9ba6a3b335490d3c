"""The C ABI: abi.h, the generated shim library, headers and CMake files.

Everything here runs without a GPU: every check a launcher makes before it
needs the driver is exercised directly, and the driver path (image choice,
per-context modules, parameter packing) runs against tests/fake_libcuda.c,
which the shim opens through BUILDTILE_LIBCUDA.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import re
import shutil
import subprocess

import c_abi_support as support
import pytest
from c_abi_support import (  # noqa: F401 (the C ABI tests of other files import them from here)
    CC,
    CXX,
    HERE,
    WARNINGS,
    DLTensor,
    FakeState,
    LaunchConfig,
    Shim,
    config,
    expect_params,
    fresh_fake_driver,
    param_int,
    run,
    tensor,
)

from buildtile.backend import Emitter
from buildtile.config import BuildtileSettings, CAbiSettings
from buildtile.errors import (
    AliasingError,
    BuildtileError,
    ContractError,
    CudaError,
    NoImageError,
    TypeMismatchError,
)
from buildtile.interop.c_abi import C_ABI_EMITTER, emit
from buildtile.interop.c_requires import expression
from buildtile.interop.host_cli import package_main
from buildtile.runtime.requires import RequirementEvalError, compile_requirement

ROOT = HERE.parent
INCLUDE = ROOT / "buildtile" / "include"
CMAKE = shutil.which("cmake")
needs_cc = pytest.mark.skipif(CC is None, reason="needs a C compiler")
needs_cxx = pytest.mark.skipif(CXX is None or CC is None, reason="needs a C++ compiler")
needs_cmake = pytest.mark.skipif(CMAKE is None or CC is None or CXX is None, reason="needs cmake and compilers")

PKG = support.PACKAGE
LAUNCHERS = {
    "bt_example_kernels_ops__vecadd",
    "bt_example_kernels_ops__saxpy",
    "bt_example_kernels_ops__matadd",
    "bt_example_kernels_misc__fill_unsafe_demo_unsafe",
    "bt_example_kernels_misc__histogram",
    "bt_example_kernels_misc__scale3d",
}

# device addresses the launchers only compare and pass on (nothing dereferences them)
A, B, C = 0x7F0000000000, 0x7F0000100000, 0x7F0000200000


# --------------------------------------------------------------------------
# Fixtures: one emitted package, its shim compiled once, fresh copies per test


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    """(root, manifest, cmake project dir) of a package with the example and extra kernels."""
    root = tmp_path_factory.mktemp("pkg")
    manifest = support.write_package(root, support.example_kernels() + support.extra_kernels())
    result = emit(manifest, root / PKG / "_buildtile", root / "build", BuildtileSettings())
    return root, manifest, result.cmake_source_dir


@pytest.fixture(scope="module")
def shim_path(package):
    _, _, project = package
    return support.compile_shim(project, project.parent / "libshim.so")


@pytest.fixture
def shim(package, shim_path, tmp_path, monkeypatch):
    """A fresh copy of the shim (its own driver state) whose driver is missing."""
    monkeypatch.setenv("BUILDTILE_LIBCUDA", str(tmp_path / "no" / "libcuda.so.1"))
    copy = tmp_path / "libshim.so"
    shutil.copy(shim_path, copy)
    return Shim(copy, package[1])


@pytest.fixture(scope="module")
def fake_driver_path(tmp_path_factory):
    return support.compile_fake_driver(tmp_path_factory.mktemp("fake") / "libcuda.so.1")


@pytest.fixture
def fake(fake_driver_path, package, shim_path, tmp_path, monkeypatch):
    """(shim, driver lib, driver state): a fresh shim over the fake driver, device 0 current, cc 9.0."""
    driver, state = fresh_fake_driver(fake_driver_path, monkeypatch, devices=2)
    copy = tmp_path / "libshim.so"
    shutil.copy(shim_path, copy)
    return Shim(copy, package[1]), driver, state


def artifact(package, kernel_name: str, key: str) -> bytes:
    root, manifest, _ = package
    k = next(k for k in manifest["kernels"] if k["name"] == kernel_name)
    return (root / PKG / "_buildtile" / k["artifacts"][key]["path"]).read_bytes()


def vecadd_args(n=1000, *, c_len=None):
    return tensor(A, [n]), tensor(B, [n]), tensor(C, [n if c_len is None else c_len])


# --------------------------------------------------------------------------
# abi.h


def abi_enum() -> dict[str, int]:
    text = (INCLUDE / "buildtile" / "abi.h").read_text()
    return {name: int(value) for name, value in re.findall(r"^\s+(BT_\w+) = (\d+)", text, re.MULTILINE)}


def test_status_codes_equal_the_error_code_numbers():
    codes = abi_enum()
    assert codes["BT_OK"] == 0
    for name, error in [
        ("BT_ERR_MISMATCHED_TYPES", TypeMismatchError),
        ("BT_ERR_ALIAS", AliasingError),
        ("BT_ERR_CONTRACT", ContractError),
        ("BT_ERR_NO_IMAGE", NoImageError),
        ("BT_ERR_CUDA", CudaError),
    ]:
        assert f"BT{codes[name]:04d}" == error.code, name
    with pytest.raises(BuildtileError) as info:
        from buildtile.interop.manifest import check_versions

        check_versions({"manifest_version": 1, "abi_version": 99}, "x")
    assert f"BT{codes['BT_ERR_ABI']:04d}" == info.value.code
    assert codes["BT_ERR_NO_DRIVER"] == 701
    assert "#define BUILDTILE_ABI_VERSION 1" in (INCLUDE / "buildtile" / "abi.h").read_text()


@needs_cxx
@pytest.mark.parametrize("compiler,flags", [("c", ["-std=c99", "-Wpedantic"]), ("c++", ["-std=c++11", "-Wpedantic"])])
def test_abi_header_compiles_as_c_and_cpp(tmp_path, compiler, flags):
    source = tmp_path / ("t.c" if compiler == "c" else "t.cpp")
    source.write_text('#include "buildtile/abi.h"\n'
                      "int f(const bt_launch_config* c, const DLTensor* t) { return (int)c->grid[0] + t->ndim + BT_ERR_ALIAS; }\n")
    run([CC if compiler == "c" else CXX, *flags, *WARNINGS, "-fsyntax-only", "-I", INCLUDE, source])


@needs_cc
def test_abi_header_defers_to_a_dlpack_header_included_first(tmp_path):
    (tmp_path / "dlpack").mkdir()
    (tmp_path / "dlpack" / "dlpack.h").write_text(
        "#ifndef DLPACK_DLPACK_H_\n#define DLPACK_DLPACK_H_\n#include <stdint.h>\n"
        "typedef enum { kDLCPU = 1, kDLCUDA = 2 } DLDeviceType;\n"
        "typedef struct { DLDeviceType device_type; int32_t device_id; } DLDevice;\n"
        "typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;\n"
        "typedef struct { void* data; DLDevice device; int32_t ndim; DLDataType dtype; int64_t* shape;"
        " int64_t* strides; uint64_t byte_offset; } DLTensor;\n#endif\n"
    )
    source = tmp_path / "t.c"
    source.write_text('#include <dlpack/dlpack.h>\n#include "buildtile/abi.h"\n'
                      "#ifdef BUILDTILE_OWN_DLPACK\n#error declared twice\n#endif\n"
                      "int f(const DLTensor* t) { return t->ndim; }\n")
    run([CC, "-std=c99", *WARNINGS, "-fsyntax-only", "-I", INCLUDE, "-I", tmp_path, source])


@needs_cc
def test_dltensor_has_the_dlpack_layout(tmp_path):
    source = tmp_path / "t.c"
    source.write_text(
        '#include <stddef.h>\n#include <stdio.h>\n#include "buildtile/abi.h"\n'
        "int main(void) { printf(\"%zu %zu %zu %zu %zu %zu %zu %zu %zu %zu\", sizeof(DLTensor),"
        " offsetof(DLTensor, data), offsetof(DLTensor, device), offsetof(DLTensor, ndim),"
        " offsetof(DLTensor, dtype), offsetof(DLTensor, shape), offsetof(DLTensor, strides),"
        " offsetof(DLTensor, byte_offset), sizeof(DLDevice), sizeof(DLDataType)); return 0; }\n"
    )
    run([CC, "-std=c99", *WARNINGS, "-I", INCLUDE, source, "-o", tmp_path / "t"])
    # dlpack.h's layout on 64-bit platforms
    assert run([tmp_path / "t"]).stdout.split() == ["48", "0", "8", "16", "20", "24", "32", "40", "8", "4"]
    assert ctypes.sizeof(DLTensor) == 48


# --------------------------------------------------------------------------
# The emitter


def test_emitter_is_registered_under_c_abi_and_follows_the_setting():
    assert isinstance(C_ABI_EMITTER, Emitter)
    assert C_ABI_EMITTER.name == "c-abi"
    assert C_ABI_EMITTER.enabled(BuildtileSettings(c_abi=CAbiSettings(enabled=True)))
    assert not C_ABI_EMITTER.enabled(BuildtileSettings())


def test_emit_writes_headers_and_cmake_config_into_the_package(package):
    root, _, project = package
    out = root / PKG / "_buildtile"
    for rel in ["include/buildtile/abi.h", "include/buildtile/buildtile.hpp", "include/example_kernels/kernels.h",
                "include/example_kernels/kernels.hpp", "cmake/example_kernelsConfig.cmake",
                "cmake/example_kernelsConfigVersion.cmake"]:
        assert (out / rel).is_file(), rel
    assert (out / "include/buildtile/abi.h").read_text() == (INCLUDE / "buildtile/abi.h").read_text()
    config = (out / "cmake/example_kernelsConfig.cmake").read_text()
    assert "add_library(example_kernels::kernels SHARED IMPORTED)" in config
    assert "${CMAKE_CURRENT_LIST_DIR}" in config and str(root) not in config
    assert 'PACKAGE_VERSION "0.1.0"' in (out / "cmake/example_kernelsConfigVersion.cmake").read_text()
    assert project == root / "build" / "c_abi"
    cmakelists = (project / "CMakeLists.txt").read_text()
    assert "add_library(example_kernels_kernels SHARED" in cmakelists
    assert "${SKBUILD_PLATLIB_DIR}/example_kernels/_buildtile/lib" in cmakelists
    assert "cuda" not in re.sub(r"#.*", "", cmakelists).lower()  # no link to the driver


def test_emit_again_leaves_unchanged_files_untouched(package):
    root, manifest, project = package
    shim = project / "src" / "kernels.c"
    before = shim.stat().st_mtime_ns
    os.utime(shim, ns=(before - 10**9, before - 10**9))
    emit(manifest, root / PKG / "_buildtile", root / "build", BuildtileSettings())
    assert shim.stat().st_mtime_ns == before - 10**9


def test_generated_c_embeds_every_image_byte_for_byte(package):
    _, _, project = package
    text = (project / "src" / "kernels.c").read_text()
    arrays = re.findall(r"static const unsigned char (\w+)\[(\d+)\] = \{\n([\d,\n]*)\n\};", text)
    embedded = {bytes(int(b) for b in re.findall(r"\d+", body)) for _, _, body in arrays}
    assert artifact(package, "vecadd", "sm_90") in embedded
    assert artifact(package, "matadd", "sm_80") in embedded
    assert artifact(package, "vecadd", "ptx") + b"\0" in embedded  # PTX is NUL-terminated for the JIT


def _bad_manifest(package, tmp_path, edit):
    root, manifest, _ = package
    broken = json.loads(json.dumps(manifest))
    edit(broken)
    with pytest.raises(BuildtileError) as info:
        emit(broken, root / PKG / "_buildtile", tmp_path / "build", None)
    return info.value


@pytest.mark.parametrize(
    "edit,code,words",
    [
        (lambda m: m["kernels"][0]["params"][0].update(kind="tile_out"), "BT0622", "kernel ABI v1 does not define"),
        (lambda m: m.update(abi_version=2), "BT0622", "ABI version 2"),
        (lambda m: m["kernels"][0]["params"][0].update(dtype="f8"), "BT0621", "unknown dtype"),
        (lambda m: m["kernels"][2]["params"][0].update(rank=9), "BT0621", "rank 9"),
        (lambda m: m["kernels"][0]["contract"]["requires"][0]["expr"].update(lhs={"op": "len", "param": "zz"}),
         "BT0621", "no parameter named 'zz'"),
        (lambda m: m["kernels"][0]["contract"]["requires"][0]["expr"].update(rhs={"op": "const", "value": 2**70}),
         "BT0621", "int64"),
        (lambda m: m["kernels"][0]["contract"].update(block=[0, 1, 1]), "BT0621", "contract.block"),
        (lambda m: m["kernels"][0]["artifacts"]["sm_90"].update(sha256="0" * 64), "BT0623", "sha256"),
        (lambda m: m["kernels"][0]["artifacts"]["sm_90"].update(path="kernels/missing.cubin"), "BT0623", "cannot be read"),
        (lambda m: m["kernels"][0]["artifacts"]["sm_90"].update(kind="fatbin"), "BT0621", "not a cubin or ptx"),
        (lambda m: m["kernels"][1].update(symbol=m["kernels"][0]["symbol"]), "BT0621", "share the PTX entry name"),
    ],
)
def test_a_malformed_manifest_stops_the_emitter_with_a_coded_error(package, tmp_path, edit, code, words):
    error = _bad_manifest(package, tmp_path, edit)
    assert error.code == code
    assert words in str(error)


# --------------------------------------------------------------------------
# The shim library, without a GPU


@needs_cc
def test_shim_exports_only_its_launchers_and_needs_no_libcuda(shim_path):
    nm = run(["nm", "-D", "--defined-only", shim_path]).stdout
    exported = {line.split()[-1] for line in nm.splitlines() if " T " in line}
    assert exported == LAUNCHERS | {"example_kernels_last_error", "example_kernels_abi_version"}
    needed = run(["readelf", "-d", shim_path]).stdout
    assert "libcuda" not in needed


@needs_cc
def test_shim_loads_on_a_machine_without_a_gpu(shim):
    assert shim.lib.example_kernels_abi_version() == 1
    assert shim.last_error == ""


@needs_cc
def test_a_missing_driver_is_a_status_and_a_message_not_a_crash(shim, capfd):
    status = shim.vecadd(config(4), *vecadd_args())
    assert status == 701
    assert shim.last_error.startswith("error[BT0701]: the CUDA driver could not be loaded")
    assert "= help:" in shim.last_error
    assert capfd.readouterr() == ("", "")  # the library never prints


VECADD = "mismatched types: parameter `{}` of kernel `example_kernels.ops.vecadd` expects {}, got "


@needs_cc
@pytest.mark.parametrize(
    "make_args,words",
    [
        (lambda: (tensor(A, [8], "f64"), tensor(B, [8]), tensor(C, [8])),
         VECADD.format("a", "Slice[f32]") + "a f64 DLTensor of shape (8,) on cuda:0"),
        (lambda: (tensor(A, [8]), tensor(B, [8], "i32"), tensor(C, [8])),
         VECADD.format("b", "Slice[f32]") + "a i32 DLTensor"),
        (lambda: (tensor(A, [8], lanes=4), tensor(B, [8]), tensor(C, [8])), "DLPack type (code 2, 32 bits, 4 lanes)"),
        (lambda: (tensor(A, [2, 4]), tensor(B, [8]), tensor(C, [8])), "a f32 DLTensor of shape (2, 4) on cuda:0"),
        (lambda: (tensor(A, [8], device=(1, 0)), tensor(B, [8]), tensor(C, [8])),
         "in host memory (DLPack device type 1) (the kernel reads GPU memory)"),
        (lambda: (None, tensor(B, [8]), tensor(C, [8])), VECADD.format("a", "Slice[f32]") + "NULL"),
        (lambda: (tensor(A, [8], strides=[2]), tensor(B, [8]), tensor(C, [8])), "(not contiguous: stride 2 elements)"),
        (lambda: (tensor(A, [8]), tensor(B, [8]), tensor(C, [8], byte_offset=2)), "is not aligned to 4 bytes)"),
        (lambda: (tensor(A, [-1]), tensor(B, [8]), tensor(C, [8])), "shape (-1,) on cuda:0 (a negative extent)"),
        (lambda: (tensor(0, [8]), tensor(B, [8]), tensor(C, [8])), "(its data pointer is null)"),
        (lambda: (tensor(2**64 - 16, [8]), tensor(B, [8]), tensor(C, [8])), "(it spans more memory than int64 counts)"),
        (lambda: (tensor(A, [8], byte_offset=2**64 - 8), tensor(B, [8]), tensor(C, [8])),
         "(its data pointer plus byte_offset is not a 64-bit address)"),
        (lambda: (tensor(A, [2**62]), tensor(B, [8]), tensor(C, [8])), "(it spans more memory than int64 counts)"),
        (lambda: (tensor(A, [8]), tensor(B, [8], device=(2, 1)), tensor(C, [8])),
         "arguments of kernel `example_kernels.ops.vecadd` are on different devices: `a` is on cuda:0, `b` is on cuda:1"),
    ],
)
def test_wrong_arguments_are_refused_with_bt0308_before_the_driver(shim, make_args, words):
    assert shim.vecadd(config(1), *make_args()) == 308
    assert shim.last_error.startswith("error[BT0308]: mismatched types: ")
    assert words in shim.last_error


@needs_cc
def test_managed_memory_and_single_element_strided_slices_are_accepted(shim):
    # they pass every check, so the launch goes on to the (missing) driver
    args = tensor(A, [1], strides=[5]), tensor(B, [1], device=(13, 0)), tensor(C, [1])
    assert shim.vecadd(config(1), *args) == 701


@needs_cc
@pytest.mark.parametrize(
    "make_args,words",
    [
        (lambda: (tensor(A, [8]), tensor(B, [8]), tensor(A, [8])),
         ("cannot borrow `c` as mutable because it is also borrowed as immutable (as `a`): kernel "
          f"`example_kernels.ops.vecadd` writes `c`, and `c` (bytes {A:#x}..{A + 32:#x}) overlaps `a`")),
        (lambda: (tensor(A, [8]), tensor(B, [8]), tensor(B, [8], byte_offset=16)), "overlaps `b`"),
        (lambda: (tensor(A, [8]), tensor(B, [8]), tensor(A - 4, [8])), "(as `a`)"),
    ],
)
def test_an_output_overlapping_another_argument_is_refused_with_bt0502(shim, make_args, words):
    assert shim.vecadd(config(1), *make_args()) == 502
    assert shim.last_error.startswith("error[BT0502]: ")
    assert words in shim.last_error
    assert shim.last_error.endswith("= help: pass a separate buffer for `c`")


@needs_cc
def test_disjoint_parts_of_one_allocation_and_shared_inputs_are_fine(shim):
    # a and b are one buffer (both only read); c is the bytes just after it
    assert shim.vecadd(config(1), tensor(A, [8]), tensor(A, [8]), tensor(A, [8], byte_offset=32)) == 701
    # empty arguments overlap nothing
    assert shim.vecadd(config(1), tensor(A, [0]), tensor(A, [0]), tensor(A, [0])) == 701


@needs_cc
def test_an_output_whose_strides_repeat_elements_is_refused_with_bt0308(shim):
    a, b = tensor(A, [4, 4]), tensor(B, [4, 4])
    assert shim.matadd(config(1, 1), a, b, tensor(C, [4, 4], strides=[0, 1])) == 308
    assert "(its strides make different indices write the same element)" in shim.last_error
    assert shim.matadd(config(1, 1), a, b, tensor(C, [4, 4], strides=[2, 1])) == 308
    # transposed, padded and reversed layouts keep every element apart
    assert shim.matadd(config(1, 1), a, b, tensor(C, [4, 4], strides=[1, 4])) == 701
    assert shim.matadd(config(1, 1), a, b, tensor(C, [4, 4], strides=[8, 1])) == 701
    assert shim.matadd(config(1, 1), a, b, tensor(C + 64, [4, 4], strides=[-4, -1])) == 701
    # a broadcast input is fine: only outputs must not repeat
    assert shim.matadd(config(1, 1), tensor(A, [4, 4], strides=[0, 1]), b, tensor(C, [4, 4])) == 701


@needs_cc
def test_a_strided_output_overlapping_an_input_is_refused(shim):
    # c walks backwards from C + 60 to C; a occupies [C + 60, C + 124)
    a, b = tensor(C + 60, [4, 4]), tensor(B, [4, 4])
    assert shim.matadd(config(1, 1), a, b, tensor(C + 60, [4, 4], strides=[-4, -1])) == 502
    assert shim.matadd(config(1, 1), tensor(C + 64, [4, 4]), b, tensor(C + 60, [4, 4], strides=[-4, -1])) == 701


@needs_cc
def test_an_output_shorter_than_its_inputs_breaks_requires_with_bt0600(shim):
    assert shim.vecadd(config(4), *vecadd_args(1000, c_len=999)) == 600
    assert shim.last_error == (
        "error[BT0600]: launch contract violated: kernel `example_kernels.ops.vecadd` requires "
        "`len(a) == len(c)` but len(a) = 1000, len(c) = 999\n"
        "  = help: pass arguments whose sizes satisfy the kernel's `requires`"
    )


@needs_cc
def test_requires_may_read_integer_scalars_and_floor_divide(shim):
    values, bins = tensor(A, [5], "i32"), tensor(B, [16], "u32")
    assert shim.histogram(config(1), values, bins, 15) == 600
    assert "`len(bins) == nbins` but len(bins) = 16, nbins = 15" in shim.last_error
    assert shim.histogram(config(1), tensor(A, [1], "i32"), bins, 16) == 600
    assert "`len(values) // 2 >= 1` but len(values) = 1" in shim.last_error
    assert shim.histogram(config(1), values, bins, 16) == 701


@needs_cc
def test_an_atomic_slice_is_an_output_for_aliasing(shim):
    assert shim.histogram(config(1), tensor(A, [16], "i32"), tensor(A, [16], "u32"), 16) == 502
    assert "cannot borrow `bins` as mutable" in shim.last_error


@needs_cc
@pytest.mark.parametrize(
    "cfg,words",
    [
        (lambda: None, "got no launch configuration (cfg is NULL)"),
        (lambda: config(0), "got grid (0, 1, 1), but every grid dimension must be at least 1 (axis x is 0)"),
        (lambda: config(4, 2), "indexes its writes with `index_1d()`, so its grid must be 1-D, got grid (4, 2, 1)"),
        (lambda: config(4, 1, 2), "must be 1-D"),
    ],
)
def test_a_launch_configuration_against_the_contract_is_refused_with_bt0600(shim, cfg, words):
    assert shim.vecadd(cfg(), *vecadd_args()) == 600
    assert shim.last_error.startswith("error[BT0600]: launch contract violated: ")
    assert words in shim.last_error


@needs_cc
def test_a_2d_kernel_takes_a_2d_grid(shim):
    a, b, c = tensor(A, [4, 4]), tensor(B, [4, 4]), tensor(C, [4, 4])
    assert shim.matadd(config(1, 1, 2), a, b, c) == 600
    assert "`index_2d()`, so its grid must have z == 1" in shim.last_error
    assert shim.matadd(config(3, 2), a, b, c) == 701


@needs_cc
def test_a_kernel_without_a_contract_has_only_an_unsafe_launcher(shim):
    assert not hasattr(shim.lib, "bt_example_kernels_misc__fill_unsafe_demo")
    x = tensor(A, [8])
    assert shim.fill_unsafe_demo(config(1), None, x, 8, True, 0x3C00) == 600
    assert "got no block (block is NULL)" in shim.last_error
    assert shim.fill_unsafe_demo(config(1), (ctypes.c_uint32 * 3)(32, 0, 1), x, 8, True, 0) == 600
    assert "got block (32, 0, 1), but a block's y dimension must be at least 1" in shim.last_error
    # its requires still hold; the grid shape is the caller's business
    assert shim.fill_unsafe_demo(config(1), (ctypes.c_uint32 * 3)(32, 1, 1), x, -1, True, 0) == 600
    assert shim.fill_unsafe_demo(config(2, 2), (ctypes.c_uint32 * 3)(32, 1, 1), x, 8, True, 0) == 701


@needs_cc
def test_the_dynamic_shared_memory_given_must_cover_the_contract(shim):
    x, y = tensor(A, [2, 2, 2]), tensor(B, [2, 2, 2])
    assert shim.scale3d(config(1, shared=512), x, y, 2.0) == 600
    assert "needs 1024 bytes of dynamic shared memory, got 512" in shim.last_error


@needs_cc
def test_the_error_message_is_per_thread_and_cleared_by_the_next_call(shim):
    import threading

    assert shim.vecadd(config(0), *vecadd_args()) == 600
    seen = []
    thread = threading.Thread(target=lambda: seen.append(shim.last_error))
    thread.start()
    thread.join()
    assert seen == [""]
    assert shim.last_error.startswith("error[BT0600]")
    assert shim.vecadd(config(1), *vecadd_args(c_len=3)) == 600
    assert "len(c) = 3" in shim.last_error


# --------------------------------------------------------------------------
# `requires` compiled to C means what the Python host's evaluator says

_ARITHMETIC = ("+", "-", "*", "//", "%")
_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")


def _compile_c_relations(tmp_path, exprs, values) -> list[str]:
    """Run each relation in C for every (x, y) in values x values: lines "bad value"."""
    local_of = {("param", "x"): "x", ("param", "y"): "y"}
    body = "\n".join(
        f"        {{ int bad = 0; const int64_t v = {expression(e, local_of)};"
        f' printf("%d %lld\\n", bad, bad ? 0LL : (long long)v); }}'
        for e in exprs
    )
    literals = ", ".join("INT64_MIN" if v == -(2**63) else f"INT64_C({v})" for v in values)
    source = tmp_path / "requires.c"
    source.write_text(
        '#include <stdio.h>\n#include "bt_runtime.h"\n'
        f"static const int64_t values[] = {{{literals}}};\n"
        f"int main(void) {{\n  for (int i = 0; i < {len(values)}; ++i) for (int j = 0; j < {len(values)}; ++j) {{\n"
        "        const int64_t x = values[i], y = values[j];\n"
        f"{body}\n  }}\n  return 0;\n}}\n"
    )
    templates = ROOT / "buildtile" / "interop" / "templates"
    run([CC, "-std=c11", *WARNINGS, "-Wpedantic", "-I", INCLUDE, "-I", templates, source, "-o", tmp_path / "requires"])
    return run([tmp_path / "requires"]).stdout.splitlines()


@needs_cc
def test_requires_in_c_agrees_with_the_python_host(tmp_path):
    rng = random.Random(7)
    leaves = [{"op": "param", "name": "x"}, {"op": "param", "name": "y"}]

    def tree(depth):
        if depth == 0 or rng.random() < 0.25:
            return rng.choice(leaves) if rng.random() < 0.6 else {"op": "const", "value": rng.choice([0, 1, -1, 2, -3, 7])}
        kind = rng.choice(["bin", "bin", "bin", "cmp", "and", "or", "not"])
        if kind in ("bin", "cmp"):
            fn = rng.choice(_ARITHMETIC if kind == "bin" else _COMPARISONS)
            return {"op": kind, "fn": fn, "lhs": tree(depth - 1), "rhs": tree(depth - 1)}
        if kind == "not":
            return {"op": "not", "arg": tree(depth - 1)}
        return {"op": kind, "args": [tree(depth - 1) for _ in range(rng.randint(1, 3))]}

    # small values: no int64 overflow can happen, so both hosts must agree exactly
    exprs = [tree(4) for _ in range(150)]
    values = [0, 1, -1, 2, -2, 5, -5, 7]
    params = [{"name": "x", "kind": "scalar", "dtype": "i64"}, {"name": "y", "kind": "scalar", "dtype": "i64"}]
    python = [compile_requirement({"text": "r", "expr": e}, params, "test") for e in exprs]
    expected = []
    for x in values:
        for y in values:
            for r in python:
                try:
                    expected.append(f"0 {int(r.test([x, y]))}")
                except RequirementEvalError:  # division by zero: the relation fails
                    expected.append("1 0")
    assert _compile_c_relations(tmp_path, exprs, values) == expected


@needs_cc
def test_requires_in_c_fails_a_relation_that_overflows_int64(tmp_path):
    def bin_(fn, lhs, rhs):
        return {"op": "bin", "fn": fn, "lhs": lhs, "rhs": rhs}

    x, y = {"op": "param", "name": "x"}, {"op": "param", "name": "y"}
    exprs = [bin_("*", x, y), bin_("+", x, y), bin_("-", x, y), bin_("//", x, y), bin_("%", x, y)]
    got = _compile_c_relations(tmp_path, exprs, [-(2**63), -1])
    # (x, y) = (INT64_MIN, INT64_MIN), (INT64_MIN, -1), (-1, INT64_MIN), (-1, -1)
    assert got[5:10] == ["1 0", "1 0", "0 -9223372036854775807", "1 0", "0 0"]
    assert got[15:20] == ["0 1", "0 -2", "0 0", "0 1", "0 0"]


# --------------------------------------------------------------------------
# The driver path, against the fake driver


@needs_cc
def test_a_valid_launch_passes_grid_contract_block_stream_and_abi_params(fake):
    shim, _, state = fake
    flat = expect_params(state, shim.kernels["vecadd"])
    assert shim.vecadd(config(4, stream=0x1234), *vecadd_args(1000)) == 0, shim.last_error
    assert shim.last_error == ""
    assert state.launches == 1 and state.function == b"example_kernels_ops__vecadd"
    assert list(state.grid) == [4, 1, 1] and list(state.block) == [256, 1, 1]
    assert state.shared == 0 and state.stream == 0x1234
    assert [p.name for p in flat] == ["a.data", "a.len", "b.data", "b.len", "c.data", "c.len"]
    assert [param_int(state, i) for i in range(6)] == [A, 1000, B, 1000, C, 1000]


@needs_cc
def test_scalars_travel_by_value_with_their_abi_size(fake):
    shim, _, state = fake
    expect_params(state, shim.kernels["saxpy"])
    assert shim.saxpy(config(1), 2.5, *vecadd_args(10)) == 0, shim.last_error
    assert ctypes.c_float.from_buffer_copy(bytes(state.params[0])[:4]).value == 2.5
    expect_params(state, shim.kernels["fill_unsafe_demo"])
    assert shim.fill_unsafe_demo(config(3), (ctypes.c_uint32 * 3)(64, 2, 1), tensor(A, [8]), 8, True, 0x3C00) == 0
    assert list(state.block) == [64, 2, 1] and list(state.grid) == [3, 1, 1]
    assert param_int(state, 2) == 8
    assert bytes(state.params[3])[:1] == b"\x01"        # bool: one byte
    assert bytes(state.params[4])[:2] == b"\x00\x3c"    # f16: its bits


@needs_cc
def test_tensors_travel_as_pointer_shape_and_strides_in_elements(fake):
    shim, _, state = fake
    expect_params(state, shim.kernels["matadd"])
    a = tensor(A, [3, 5], byte_offset=8)             # compact: strides (5, 1)
    b = tensor(B, [3, 5], strides=[1, 3])            # transposed view
    c = tensor(C, [3, 5], strides=[8, 1])            # padded rows
    assert shim.matadd(config(1, 1), a, b, c) == 0, shim.last_error
    assert [param_int(state, i) for i in range(15)] == [
        A + 8, 3, 5, 5, 1,
        B, 3, 5, 1, 3,
        C, 3, 5, 8, 1,
    ]


@needs_cc
@pytest.mark.parametrize("cc,key", [((9, 0), "sm_90"), ((8, 0), "sm_80"), ((8, 6), "sm_80"), ((12, 0), "ptx")])
def test_the_exact_cubin_is_loaded_else_an_older_minor_else_the_ptx(fake, package, cc, key):
    shim, _, state = fake
    state.cc_major, state.cc_minor = cc
    assert shim.vecadd(config(1), *vecadd_args()) == 0, shim.last_error
    expected = artifact(package, "vecadd", key)
    assert ctypes.string_at(state.last_image, len(expected)) == expected


@needs_cc
def test_a_device_older_than_every_image_gets_bt0610_naming_the_targets(fake):
    shim, _, state = fake
    state.cc_major, state.cc_minor = 7, 5
    assert shim.vecadd(config(1), *vecadd_args()) == 610
    assert shim.last_error == (
        "error[BT0610]: no image of kernel `example_kernels.ops.vecadd` runs on device 0 (sm_75): "
        "the package was built for sm_80 (cubin), sm_90 (cubin), PTX for sm_80\n"
        '  = help: rebuild the package with "sm_75" in `targets` under [tool.buildtile], '
        "or with `ptx = true` and a lowest target no newer than sm_75"
    )
    assert state.launches == 0


@needs_cc
def test_a_refused_cubin_falls_back_to_the_ptx(fake):
    shim, _, state = fake
    state.refuse_cubin = 1
    assert shim.vecadd(config(1), *vecadd_args()) == 0, shim.last_error
    assert ctypes.string_at(state.last_image, 8) == b".version"


@needs_cc
def test_a_refused_ptx_is_bt0610_with_the_jit_log(fake):
    shim, _, state = fake
    state.cc_major, state.cc_minor, state.refuse_ptx = 12, 0, 1
    assert shim.vecadd(config(1), *vecadd_args()) == 610
    assert "the driver refused the PTX for sm_80 with CUDA_ERROR_UNSUPPORTED_PTX_VERSION 222" in shim.last_error
    assert "ptxas fatal: refused by the fake driver" in shim.last_error


@needs_cc
def test_modules_load_once_per_context(fake):
    shim, driver, state = fake
    for _ in range(3):
        assert shim.vecadd(config(1), *vecadd_args()) == 0
    assert state.module_loads == 1 and state.launches == 3
    driver.fake_make_current(0, 1)  # a new context on the same device
    assert shim.vecadd(config(1), *vecadd_args()) == 0
    assert state.module_loads == 2


@needs_cc
def test_without_a_current_context_the_arguments_device_primary_context_is_used(fake):
    shim, driver, state = fake
    driver.fake_make_current(-1, 0)
    args = [tensor(p, [8], device=(2, 1)) for p in (A, B, C)]
    assert shim.vecadd(config(1), *args) == 0, shim.last_error
    assert state.primary_retains == 1
    assert shim.vecadd(config(1), *args) == 0  # now current on this thread
    assert state.primary_retains == 1


@needs_cc
@pytest.mark.parametrize("device_type", [2, 13], ids=["device memory", "managed memory"])
def test_arguments_on_another_device_than_the_current_context_launch_on_theirs(fake, device_type):
    """As in the Python host: the primary context of the arguments' device is pushed for the
    launch, and the caller's context is current again afterwards."""
    shim, driver, state = fake
    args = [tensor(p, [8], device=(device_type, 1)) for p in (A, B, C)]
    assert shim.vecadd(config(1), *args) == 0, shim.last_error
    assert (state.launches, state.pushes) == (1, 1)
    device = ctypes.c_int(-1)
    assert driver.cuCtxGetDevice(ctypes.byref(device)) == 0 and device.value == 0  # the caller's, restored
    assert shim.vecadd(config(1), *[tensor(p, [8]) for p in (A, B, C)]) == 0  # on cuda:0: no push
    assert (state.launches, state.pushes) == (2, 1)


@needs_cc
def test_device_limits_and_minimum_compute_capability_are_bt0600(fake):
    shim, _, state = fake
    a, b, c = tensor(A, [4, 4]), tensor(B, [4, 4]), tensor(C, [4, 4])
    assert shim.matadd(config(1, 70000), a, b, c) == 600
    assert "got grid (1, 70000, 1), but device 0 allows at most 65535 blocks along y" in shim.last_error
    x, y = tensor(A, [2, 2, 2]), tensor(B, [2, 2, 2])
    assert shim.scale3d(config(1, shared=300 * 1024), x, y, 1.0) == 600
    assert "but device 0 allows at most 232448" in shim.last_error
    assert shim.scale3d(config(1, shared=64 * 1024), x, y, 1.0) == 0, shim.last_error
    assert state.shared == 64 * 1024 and state.set_attribute_value == 64 * 1024  # opted in past 48 KiB
    assert shim.scale3d(config(1), x, y, 1.0) == 0
    assert state.shared == 1024  # the contract's dynamic shared memory


@needs_cc
def test_a_device_below_the_minimum_compute_capability_is_bt0600(fake):
    shim, _, state = fake
    state.cc_major, state.cc_minor = 7, 5
    assert shim.scale3d(config(1), tensor(A, [2, 2, 2]), tensor(B, [2, 2, 2]), 1.0) == 600
    assert "needs compute capability 8.0 or newer, but device 0 is 7.5 (sm_75)" in shim.last_error


@needs_cc
def test_a_driver_without_devices_is_bt0701(fake):
    shim, _, state = fake
    state.init_result = 100
    assert shim.vecadd(config(1), *vecadd_args()) == 701
    assert "cuInit failed with CUDA_ERROR_NO_DEVICE 100 (no CUDA-capable device is detected)" in shim.last_error


# --------------------------------------------------------------------------
# C++ layer and CMake


CPP_HOST = r"""
#include <cstdio>
#include <cstring>
#include "example_kernels/kernels.hpp"

int main()
{
    namespace ops = example_kernels::ops;
    using buildtile::DeviceSpan;
    example_kernels::check_abi();
    float* a = reinterpret_cast<float*>(0x7f0000000000);
    float* c = reinterpret_cast<float*>(0x7f0000200000);
    try {
        ops::vecadd({buildtile::cover(1000, ops::vecadd_block)}, DeviceSpan<const float>(a, 1000),
                    DeviceSpan<const float>(a, 1000), DeviceSpan<float>(c, 999));
        return 1;
    } catch (const buildtile::Error& e) {
        std::printf("%d|%s\n", e.code(), e.what());
        if (e.code() != 600 || std::strncmp(e.what(), "error[BT0600]", 13) != 0)
            return 2;
    }
    try {
        ops::matadd(buildtile::cover(7, 5, ops::matadd_block), buildtile::DeviceTensor<const float, 2>(a, {5, 7}),
                    buildtile::DeviceTensor<const float, 2>(a, {5, 7}), buildtile::DeviceTensor<float, 2>(a, {5, 7}));
        return 3;
    } catch (const buildtile::Error& e) {
        std::printf("%d|%s\n", e.code(), e.what());
    }
    return 0;
}
"""


@needs_cxx
def test_cpp_header_compiles_warning_free_as_cpp17(package, tmp_path):
    root, _, _ = package
    source = tmp_path / "host.cpp"
    source.write_text(CPP_HOST)
    include = root / PKG / "_buildtile" / "include"
    run([CXX, "-std=c++17", *WARNINGS, "-Wpedantic", "-Wshadow", "-fsyntax-only", "-I", include, source])
    c_source = tmp_path / "host.c"
    c_source.write_text('#include "example_kernels/kernels.h"\nint main(void) { return example_kernels_abi_version() != 1; }\n')
    run([CC, "-std=c99", *WARNINGS, "-Wpedantic", "-fsyntax-only", "-I", include, c_source])


@needs_cxx
def test_cpp_wrappers_throw_buildtile_error_with_code_and_message(package, shim_path, tmp_path):
    root, _, _ = package
    source = tmp_path / "host.cpp"
    source.write_text(CPP_HOST)
    run([CXX, "-std=c++17", *WARNINGS, "-I", root / PKG / "_buildtile" / "include", source, shim_path,
         f"-Wl,-rpath,{shim_path.parent}", "-o", tmp_path / "host"])
    out = run([tmp_path / "host"]).stdout.splitlines()
    assert out[0] == ("600|error[BT0600]: launch contract violated: kernel `example_kernels.ops.vecadd` "
                      "requires `len(a) == len(c)` but len(a) = 1000, len(c) = 999")
    assert out[1] == "  = help: pass arguments whose sizes satisfy the kernel's `requires`"
    assert out[2].startswith("502|error[BT0502]: cannot borrow `c` as mutable")


@needs_cmake
def test_cmake_builds_installs_and_finds_the_package(package, tmp_path):
    root, _, project = package
    build = tmp_path / "build"
    run([CMAKE, "-S", project, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_C_FLAGS=-Werror"])
    run([CMAKE, "--build", build])
    platlib = tmp_path / "platlib"
    run([CMAKE, "--install", build, "--prefix", tmp_path / "prefix"])
    assert (tmp_path / "prefix" / PKG / "_buildtile" / "lib" / "libexample_kernels_kernels.so").is_file()
    run([CMAKE, "-S", project, "-B", build, f"-DSKBUILD_PLATLIB_DIR={platlib}"])
    run([CMAKE, "--install", build])
    library = platlib / PKG / "_buildtile" / "lib" / "libexample_kernels_kernels.so"
    assert library.is_file() and not library.is_symlink()

    # the installed package: what a wheel holds, moved somewhere else
    installed = tmp_path / "site" / PKG
    shutil.copytree(root / PKG, installed)
    shutil.copytree(library.parent, installed / "_buildtile" / "lib")
    host = tmp_path / "host"
    host.mkdir()
    (host / "host.cpp").write_text(CPP_HOST)
    (host / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.15)\nproject(host LANGUAGES CXX)\n"
        "find_package(example_kernels 0.1 CONFIG REQUIRED)\n"
        "add_executable(host host.cpp)\ntarget_compile_features(host PRIVATE cxx_std_17)\n"
        "target_link_libraries(host PRIVATE example_kernels::kernels)\n"
    )
    cmake_dir = installed / "_buildtile" / "cmake"
    run([CMAKE, "-S", host, "-B", host / "build", f"-Dexample_kernels_DIR={cmake_dir}"])
    run([CMAKE, "--build", host / "build"])
    assert run([host / "build" / "host"]).stdout.startswith("600|error[BT0600]")

    (host / "CMakeLists.txt").write_text((host / "CMakeLists.txt").read_text().replace(" 0.1 ", " 9.0 "))
    refused = subprocess.run([CMAKE, "-S", host, "-B", host / "build3", f"-Dexample_kernels_DIR={cmake_dir}"],
                             check=False, capture_output=True, text=True)
    assert refused.returncode != 0 and "0.1.0" in refused.stderr


# --------------------------------------------------------------------------
# python -m <package> --cmake-dir


def test_package_main_prints_the_cmake_include_and_library_locations(package, monkeypatch, capsys):
    root, _, _ = package
    monkeypatch.syspath_prepend(str(root))
    out = root / PKG / "_buildtile"
    for flag, expected in [("--cmake-dir", out / "cmake"), ("--include-dir", out / "include"),
                           ("--library", out / "lib" / "libexample_kernels_kernels.so")]:
        assert package_main(PKG, [flag]) == 0
        assert capsys.readouterr().out == f"{expected}\n"


def test_package_main_explains_a_missing_package_or_c_abi(tmp_path, monkeypatch, capsys):
    assert package_main("no_such_package_xyz", ["--cmake-dir"]) == 1
    assert capsys.readouterr().err.startswith("error[BT0620]: package 'no_such_package_xyz' is not installed")
    (tmp_path / "plain_pkg").mkdir()
    (tmp_path / "plain_pkg" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert package_main("plain_pkg", ["--include-dir"]) == 1
    err = capsys.readouterr().err
    assert "carries no C ABI" in err and "[tool.buildtile.c-abi] enabled = true" in err


# --------------------------------------------------------------------------
# Unusual kernels still generate warning-free C and C++


@needs_cxx
def test_keyword_names_scalar_only_and_rank_0_kernels_generate_clean_code(tmp_path):
    module = "example_kernels.new"  # a C++ keyword as a namespace
    kernels = [
        ({"name": "delete", "module": module, "symbol": "example_kernels_new__delete",
          "params": [{"name": "int", "kind": "slice", "dtype": "bf16", "rank": 1, "role": "in"},
                     {"name": "cfg", "kind": "scalar", "dtype": "u64", "rank": 0, "role": "in"},
                     {"name": "float", "kind": "scalar", "dtype": "f16", "rank": 0, "role": "in"},
                     {"name": "args", "kind": "disjoint_slice", "dtype": "bool", "rank": 1, "role": "out"}],
          "contract": {"block": [64], "index_dims": 1, "requires": [
              {"text": "len(int) == cfg and 1 == 1",
               "expr": {"op": "and", "args": [
                   {"op": "cmp", "fn": "==", "lhs": {"op": "len", "param": "int"}, "rhs": {"op": "param", "name": "cfg"}},
                   {"op": "cmp", "fn": "==", "lhs": {"op": "const", "value": 1}, "rhs": {"op": "const", "value": 1}}]}},
              {"text": "1 < 2", "expr": {"op": "cmp", "fn": "<", "lhs": {"op": "const", "value": 1},
                                          "rhs": {"op": "const", "value": 2}}}]}},
         support.VECADD_PTX),
        ({"name": "noop", "module": "example_kernels", "symbol": "example_kernels__noop", "params": [],
          "contract": {"block": None}}, support.VECADD_PTX),
        ({"name": "scalars", "module": "example_kernels", "symbol": "example_kernels__scalars",
          "params": [{"name": "x", "kind": "scalar", "dtype": "f64", "rank": 0, "role": "in"}],
          "contract": {"block": [32, 1, 1], "index_dims": 0}}, support.VECADD_PTX),
        ({"name": "point", "module": "example_kernels", "symbol": "example_kernels__point",
          "params": [{"name": "t", "kind": "disjoint_tensor", "dtype": "i64", "rank": 0, "role": "out"},
                     {"name": "u", "kind": "tensor", "dtype": "u32", "rank": 3, "role": "in"}],
          "contract": {"block": [32, 1, 1], "index_dims": 0, "min_compute_capability": "sm_90"}},
         support.VECADD_PTX),
    ]
    manifest = support.write_package(tmp_path, kernels, targets=("sm_90a", "sm_100"))
    out = tmp_path / PKG / "_buildtile"
    project = emit(manifest, out, tmp_path / "build", None).cmake_source_dir
    run([CC, "-std=c11", *WARNINGS, "-Wpedantic", "-fPIC", "-shared", "-fvisibility=hidden", "-I", project / "include",
         "-I", project / "src", *sorted((project / "src").glob("*.c")), "-o", tmp_path / "lib.so", "-ldl", "-lpthread"])
    host = tmp_path / "host.cpp"
    host.write_text(
        '#include "example_kernels/kernels.hpp"\n'
        "int main() {\n"
        "    buildtile::bf16* in = nullptr; bool* out = nullptr;\n"
        "    example_kernels::new_::delete_({buildtile::Dim3{1}}, buildtile::DeviceSpan<buildtile::bf16>(in, 4),\n"
        "        std::uint64_t{4}, buildtile::f16{0}, buildtile::DeviceSpan<bool>(out, 4));\n"
        "    example_kernels::noop_unsafe({buildtile::Dim3{1}}, buildtile::Dim3{32, 1, 1});\n"
        "    example_kernels::scalars({buildtile::Dim3{1}}, 1.0);\n"
        "    std::int64_t* t = nullptr;\n"
        "    example_kernels::point({buildtile::Dim3{1}}, buildtile::DeviceTensor<std::int64_t, 0>(t, {}),\n"
        "        buildtile::DeviceTensor<const std::uint32_t, 3>(nullptr, {1, 2, 3}));\n"
        "}\n"
    )
    run([CXX, "-std=c++17", *WARNINGS, "-Wpedantic", "-Wshadow", "-fsyntax-only", "-I", out / "include", host])
    text = (project / "src" / "kernels.c").read_text()
    assert '"sm_100 (cubin), sm_90a (cubin), PTX for sm_90a"' in text
    assert "const DLTensor* int_, uint64_t cfg_, uint16_t float_" in (out / "include" / PKG / "kernels.h").read_text()


def test_the_interop_plugin_registers_the_c_abi_and_frameworks_emitters():
    import pluggy

    from buildtile import hookspecs
    from buildtile.interop import plugin
    from buildtile.interop.frameworks import FRAMEWORKS_EMITTER

    manager = pluggy.PluginManager("buildtile")
    manager.add_hookspecs(hookspecs)
    manager.register(plugin)
    registered = []
    manager.hook.buildtile_register_emitters(register=registered.append)
    assert registered == [C_ABI_EMITTER, FRAMEWORKS_EMITTER]


@needs_cc
def test_a_coarsened_kernel_launches_fewer_blocks_and_gets_the_logical_grid_last(
        fake_driver_path, tmp_path, monkeypatch):
    (vecadd, ptx), *_ = support.example_kernels()
    vecadd = json.loads(json.dumps(vecadd))
    vecadd["contract"]["coarsen"] = 4
    root = tmp_path / "coarse"
    manifest = support.write_package(root, [(vecadd, ptx)])
    project = emit(manifest, root / PKG / "_buildtile", root / "build", BuildtileSettings()).cmake_source_dir
    lib = tmp_path / "libcoarse.so"
    run([CC, "-std=c11", *WARNINGS, "-fPIC", "-shared", "-I", project / "include", "-I", project / "src",
         *sorted((project / "src").glob("*.c")), "-o", lib, "-ldl", "-lpthread"])
    _, state = fresh_fake_driver(fake_driver_path, monkeypatch, devices=1)
    shim = Shim(lib, manifest)
    flat = expect_params(state, shim.kernels["vecadd"])
    state.param_count = len(flat) + 1          # the logical grid.x travels last, as an int64
    state.param_sizes[len(flat)] = 8
    assert shim.vecadd(config(10), *vecadd_args(2500)) == 0, shim.last_error
    assert list(state.grid) == [3, 1, 1]       # ceil(10 / 4) launched blocks
    assert param_int(state, len(flat)) == 10


@needs_cc
def test_a_kernel_with_an_aligned_entry_launches_it_only_for_aligned_data_pointers(
        fake_driver_path, tmp_path, monkeypatch):
    (vecadd, ptx), *_ = support.example_kernels()
    root = tmp_path / "aligned"
    manifest = support.write_package(root, [(vecadd, ptx)])
    symbol = vecadd["symbol"] + "__a16"
    aligned_ptx = ptx.replace(vecadd["symbol"], symbol)
    out = root / PKG / "_buildtile"
    manifest["kernels"][0]["aligned"] = {"align": 16, "symbol": symbol, "artifacts": {
        "sm_90": support._artifact(out, f"kernels/{symbol}.sm_90.cubin", support.fake_cubin(aligned_ptx, "sm_90"),
                                   "cubin", support.ptx_isa_of(aligned_ptx))}}
    (out / "manifest.json").write_text(json.dumps(manifest))
    project = emit(manifest, out, root / "build", BuildtileSettings()).cmake_source_dir
    lib = tmp_path / "libaligned.so"
    run([CC, "-std=c11", *WARNINGS, "-fPIC", "-shared", "-I", project / "include", "-I", project / "src",
         *sorted((project / "src").glob("*.c")), "-o", lib, "-ldl", "-lpthread"])
    _, state = fresh_fake_driver(fake_driver_path, monkeypatch, devices=1)
    shim = Shim(lib, manifest)
    expect_params(state, shim.kernels["vecadd"])
    assert shim.vecadd(config(4), *vecadd_args(1000)) == 0, shim.last_error
    assert state.function == symbol.encode()
    for a in (tensor(A + 4, [1000]), tensor(A, [1000], byte_offset=8)):   # x[1:], x[2:] of an aligned x
        assert shim.vecadd(config(4), a, tensor(B, [1000]), tensor(C, [1000])) == 0, shim.last_error
        assert state.function == vecadd["symbol"].encode()
    assert shim.vecadd(config(4), *vecadd_args(1000)) == 0, shim.last_error
    assert state.function == symbol.encode() and state.launches == 4
