"""Arrays of records through the C ABI, on tests/fake_libcuda.c: kernels.h declares each record as
a C struct whose size and field offsets the compiler checks against the layout the kernels read;
a launcher takes an array of records as a uint8 or int8 DLTensor of its bytes, passes the kernel
extents and strides counted in records, and refuses what the Python host refuses, in its words;
the C++ layer takes spans and tensors of the structs."""

from __future__ import annotations

import copy
import subprocess

import c_abi_support as support
import pytest
from c_abi_support import CC, CXX, WARNINGS, config, expect_params, param_int, run, tensor

from buildtile.backends.common.types import BOOL, F32, F64, I8, I64, record_of
from buildtile.backends.simt.records import layout_record
from buildtile.config import BuildtileSettings
from buildtile.errors import AliasingError, BuildtileError, TypeMismatchError
from buildtile.interop import manifest as manifest_format
from buildtile.interop.c_abi import emit
from buildtile.runtime.signature import KernelSignature
from buildtile.runtime.testing import FakeDLPackArray

pytestmark = pytest.mark.skipif(CC is None or CXX is None, reason="needs C and C++ compilers")

PKG = support.PACKAGE
MODULE = "example_kernels.records"
P, OUT = 0x7F00_0000_1000, 0x7F00_0010_0000
#: the layouts a build records (the compiler's own), for a Particle of 32 bytes and a Sample of 24
RECORDS = {
    "Particle": layout_record(record_of("Particle", [("x", F32), ("y", F32), ("vx", F32), ("mass", F64),
                                                     ("alive", BOOL)]), MODULE),
    "Sample": layout_record(record_of("Sample", [("tag", I8), ("value", F64), ("count", I64)]), MODULE),
}
U8, I8_CODE, F32_CODE = (1, 8, 1), (0, 8, 1), (2, 32, 1)


def record_kernels() -> list[tuple[dict, str]]:
    drift = support._kernel(
        "drift", [support._slice("p", dtype="Particle"), support._slice("out", "disjoint_slice", dtype="Particle")],
        support._contract([128, 1, 1], 1, [("len(p) == len(out)", support._eq(support._length("p"),
                                                                               support._length("out")))]),
        module=MODULE)
    grid_copy = support._kernel(
        "grid_copy", [support._tensor("src", 2, dtype="Sample"), support._tensor("dst", 2, "disjoint_tensor", "Sample")],
        support._contract([16, 16, 1], 2, []), module=MODULE)
    return [(drift, support.VECADD_PTX), (grid_copy, support.VECADD_PTX)]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return support.compiled_package(tmp_path_factory.mktemp("recordpkg"), support.example_kernels() + record_kernels(),
                                    records=RECORDS)


@pytest.fixture
def fake(built, tmp_path, monkeypatch):
    shim, _, state = support.fake_shim(built, tmp_path, monkeypatch)
    return shim, state


# ----------------------------------------------------------------------------- the header

def test_kernels_h_declares_each_record_as_a_struct_whose_layout_the_compiler_checks(built, tmp_path):
    include = built.include
    header = (include / PKG / "kernels.h").read_text()
    assert "typedef struct example_kernels_Particle {" in header and "    double mass;" in header
    assert "BUILDTILE_STATIC_ASSERT(offsetof(example_kernels_Sample, count) == 16" in header
    source = tmp_path / "host.c"
    source.write_text('#include "example_kernels/kernels.h"\n'
                      "int main(void) { return (int)(sizeof(example_kernels_Particle) + sizeof(example_kernels_Sample)); }\n")
    for std in ("c99", "c11"):
        run([CC, f"-std={std}", *WARNINGS, "-Wpedantic", "-I", include, source, "-o", tmp_path / "host"])
        assert subprocess.run([tmp_path / "host"], check=False).returncode == 32 + 24


def test_a_layout_the_c_compiler_does_not_give_stops_the_host_build(tmp_path):
    root = tmp_path / "pkg"
    records = copy.deepcopy(RECORDS)
    records["Particle"]["size"] = 40   # a layout C never gives these fields
    broken = support.write_package(root, support.example_kernels() + record_kernels(), records=records)
    emit(broken, root / PKG / "_buildtile", root / "build", BuildtileSettings())
    source = tmp_path / "host.c"
    source.write_text('#include "example_kernels/kernels.h"\nint main(void) { return 0; }\n')
    failed = subprocess.run([CC, "-std=c11", "-I", root / PKG / "_buildtile" / "include", source, "-o",
                             tmp_path / "host"], check=False, capture_output=True, text=True)
    assert failed.returncode != 0
    assert "example_kernels_Particle must have the 40 bytes the kernels read" in failed.stderr


def test_a_record_the_c_header_cannot_name_is_a_manifest_error(tmp_path):
    records = {"last_error": {**RECORDS["Particle"]}}
    drift, ptx = record_kernels()[0]
    drift = copy.deepcopy(drift)
    for p in drift["params"]:
        p["dtype"] = "last_error"
    manifest = support.write_package(tmp_path, [(drift, ptx)], records=records)
    with pytest.raises(BuildtileError) as info:
        emit(manifest, tmp_path / PKG / "_buildtile", tmp_path / "build", BuildtileSettings())
    assert info.value.code == "BT0621" and "example_kernels_last_error" in str(info.value)


# ----------------------------------------------------------------------------- launchers

@pytest.mark.parametrize("code", [U8, I8_CODE])
def test_the_records_bytes_bind_and_the_kernel_gets_a_count_of_records(fake, code):
    shim, state = fake
    flat = expect_params(state, shim.kernels["drift"])
    assert [p.name for p in flat] == ["p.data", "p.len", "out.data", "out.len"]
    status = shim.drift(config(1), bytes_tensor(P, [100, 32], code), bytes_tensor(OUT, [100, 32], code))
    assert status == 0, shim.last_error
    assert state.launches == 1
    assert [param_int(state, k) for k in range(4)] == [P, 100, OUT, 100]


def test_a_tensor_of_records_passes_its_strides_counted_in_records(fake):
    shim, state = fake
    expect_params(state, shim.kernels["grid_copy"])
    # a transposed view of a 5 x 4 array of 24-byte records, and a compact 4 x 5 one
    src = bytes_tensor(P, [4, 5, 24], strides=[24, 96, 1])
    dst = bytes_tensor(OUT, [4, 5, 24])
    assert shim.grid_copy(config(1), src, dst) == 0, shim.last_error
    assert [param_int(state, k) for k in range(10)] == [P, 4, 5, 1, 4, OUT, 4, 5, 5, 1]


def test_overlapping_record_arrays_are_refused_as_borrows(fake):
    shim, state = fake
    assert shim.drift(config(1), bytes_tensor(P, [100, 32]), bytes_tensor(P + 32 * 50, [100, 32])) == 502
    assert "cannot borrow `out` as mutable" in shim.last_error and state.launches == 0


#: (parameter, bytes shape, dtype, strides (None: compact), byte offset of the data, the refusal's words)
REFUSALS = [
    ("p", [100], F32_CODE, None, 0,
     "records of `Particle` are passed as their bytes: a uint8 or int8 array of shape (n, 32)"),
    ("p", [3200], U8, None, 0,
     "records of `Particle` are passed as their bytes: a uint8 or int8 array of shape (n, 32)"),
    ("p", [100, 16], U8, None, 0, "its last axis has 16 bytes, but a `Particle` record has 32"),
    ("p", [100, 32], U8, [1, 100], 0, "the bytes of a record are not contiguous: its last axis has stride 100"),
    ("p", [100, 32], U8, [48, 1], 0, "its strides (48, 1) (in bytes) are not whole `Particle` records of 32 bytes"),
    ("p", [100, 32], U8, [64, 1], 0, "not contiguous: stride 2 records"),
    ("p", [100, 32], U8, None, 4, f"its first element at {P + 4:#x} is not aligned to 8 bytes"),
    ("src", [4, 5], U8, None, 0,
     "records of `Sample` are passed as their bytes: a uint8 or int8 array of shape (n0, n1, 24)"),
    ("src", [4, 5, 24], U8, [120, 25, 1], 0,
     "its strides (120, 25, 1) (in bytes) are not whole `Sample` records of 24 bytes"),
]


@pytest.mark.parametrize("param, shape, code, strides, offset, why", REFUSALS)
def test_both_hosts_refuse_a_bad_record_array_in_the_same_words(built, fake, param, shape, code, strides, offset,
                                                                why):
    shim, state = fake
    name = "drift" if param == "p" else "grid_copy"
    bad = bytes_tensor(P + offset, shape, code, strides=strides)
    good = bytes_tensor(OUT, [100, 32] if name == "drift" else [4, 5, 24])
    assert getattr(shim, name)(config(1), bad, good) == 308
    c_text = shim.last_error.splitlines()[0]
    assert state.launches == 0

    signature = KernelSignature(manifest_format.parse(built.manifest, "manifest.json").kernel(MODULE, name))
    array = FakeDLPackArray(P + offset, shape, dtype=code, strides=strides)
    with pytest.raises(TypeMismatchError) as info:
        signature.bind((array, FakeDLPackArray(OUT, [100, 32] if name == "drift" else [4, 5, 24], dtype=U8)))
    python_text = str(info.value).splitlines()[0]
    for text in (c_text, python_text):
        assert text.startswith("error[BT0308]: mismatched types: parameter") and text.endswith(f" ({why})"), text


def test_the_python_host_refuses_the_same_overlap(built):
    signature = KernelSignature(manifest_format.parse(built.manifest, "manifest.json").kernel(MODULE, "drift"))
    with pytest.raises(AliasingError, match="cannot borrow `out` as mutable"):
        signature.bind((FakeDLPackArray(P, [100, 32], dtype=U8), FakeDLPackArray(P + 32 * 50, [100, 32], dtype=U8)))


# ----------------------------------------------------------------------------- the C++ layer

CPP_HOST = r"""
#include <cstdio>
#include <cstring>
#include "example_kernels/kernels.hpp"

namespace records = example_kernels::records;
using buildtile::DeviceSpan;
using buildtile::DeviceTensor;
using Particle = example_kernels_Particle;
using Sample = example_kernels_Sample;

int main()
{
    static_assert(buildtile::is_record<const Particle>::value, "kernels.hpp declares its records");
    auto* p = reinterpret_cast<Particle*>(0x7f0000001000);
    auto* out = reinterpret_cast<Particle*>(0x7f0000100000);
    DeviceSpan<const Particle> in(p, 100);
    const DLTensor bytes = in.dl();
    if (bytes.ndim != 2 || bytes.shape[0] != 100 || bytes.shape[1] != 32 || bytes.dtype.code != kDLUInt ||
        bytes.dtype.bits != 8 || bytes.strides != nullptr)
        return 10;
    // a transposed view of a 5 x 4 array: strides in records, its DLTensor's in bytes
    DeviceTensor<const Sample, 2> src(reinterpret_cast<const Sample*>(0x7f0000001000), {4, 5}, {1, 4});
    const DLTensor grid = src.dl();
    if (grid.ndim != 3 || grid.shape[2] != 24 || grid.strides[0] != 24 || grid.strides[1] != 96 ||
        grid.strides[2] != 1)
        return 11;
    records::drift({buildtile::cover(100, records::drift_block)}, in, DeviceSpan<Particle>(out, 100));
    records::grid_copy({buildtile::cover(5, 4, records::grid_copy_block)}, src,
                       DeviceTensor<Sample, 2>(reinterpret_cast<Sample*>(0x7f0000100000), {4, 5}));
    try {
        records::drift({buildtile::cover(100, records::drift_block)}, in, DeviceSpan<Particle>(p + 50, 100));
    } catch (const buildtile::Error& e) {
        std::printf("%d\n", e.code());
        return 0;
    }
    return 12;
}
"""


def test_the_cpp_wrappers_take_spans_and_tensors_of_the_structs(built, tmp_path, monkeypatch):
    source = tmp_path / "host.cpp"
    source.write_text(CPP_HOST)
    run([CXX, "-std=c++17", *WARNINGS, "-Wpedantic", "-Wshadow", "-I", built.include, source,
         built.shim, f"-Wl,-rpath,{built.shim.parent}", "-o", tmp_path / "host"])
    monkeypatch.setenv("BUILDTILE_LIBCUDA", str(built.driver))
    assert run([tmp_path / "host"]).stdout.split() == ["502"]   # two launches, then the overlap refused


# ----------------------------------------------------------------------------- helpers

def bytes_tensor(address: int, shape, code=U8, *, strides=None):
    """A DLTensor of ``shape`` at ``address`` of the DLPack type ``code`` (bytes, by default)."""
    t = tensor(address, shape, "u8", strides=strides)
    t.dtype.code, t.dtype.bits, t.dtype.lanes = code
    return t
