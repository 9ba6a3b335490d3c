"""Complex arrays through the C shim and the C++ layer, on tests/fake_libcuda.c: a complex64
DLTensor (type code 5, 64 bits) binds to a `Slice[complex64]` parameter and a float one is
refused; the C++ wrappers take `std::complex` spans."""

from __future__ import annotations

import c_abi_support as support
import pytest
from c_abi_support import CC, CXX, WARNINGS, config, run, tensor

pytestmark = pytest.mark.skipif(CC is None or CXX is None, reason="needs C and C++ compilers")

PKG = support.PACKAGE
Z, OUT = 0x7F00_0000_1000, 0x7F00_0010_0000


def complex_kernel() -> tuple[dict, str]:
    record = support._kernel(
        "rotate_phase",
        [support._slice("z", dtype="complex64"), support._slice("out", "disjoint_slice", dtype="complex128")],
        support._contract([256, 1, 1], 1, [("len(z) == len(out)", support._eq(support._length("z"),
                                                                                support._length("out")))]),
        module="example_kernels.numbers",
    )
    return record, support.VECADD_PTX


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return support.compiled_package(tmp_path_factory.mktemp("complexpkg"), support.example_kernels() + [complex_kernel()])


@pytest.fixture
def fake(built, tmp_path, monkeypatch):
    shim, _, state = support.fake_shim(built, tmp_path, monkeypatch)
    return shim, state


def test_complex_tensors_bind_to_complex_parameters(fake):
    shim, state = fake
    status = shim.rotate_phase(config(1), tensor(Z, [100], "complex64"), tensor(OUT, [100], "complex128"))
    assert status == 0, shim.last_error
    assert state.launches == 1


def test_a_float_tensor_is_not_a_complex_one(fake):
    shim, state = fake
    status = shim.rotate_phase(config(1), tensor(Z, [100], "f64"), tensor(OUT, [100], "complex128"))
    assert status == 308 and "complex64" in shim.last_error
    assert state.launches == 0


def test_the_cpp_wrappers_take_std_complex_spans(built, tmp_path):
    source = tmp_path / "host.cpp"
    source.write_text(
        '#include <complex>\n#include "example_kernels/kernels.hpp"\n'
        "int main()\n{\n"
        "    namespace numbers = example_kernels::numbers;\n"
        "    auto* z = reinterpret_cast<std::complex<float>*>(0x7f0000000000);\n"
        "    auto* out = reinterpret_cast<std::complex<double>*>(0x7f0000200000);\n"
        "    numbers::rotate_phase({buildtile::cover(100, numbers::rotate_phase_block)},\n"
        "                          buildtile::DeviceSpan<const std::complex<float>>(z, 100),\n"
        "                          buildtile::DeviceSpan<std::complex<double>>(out, 100));\n"
        "    return 0;\n}\n")
    run([CXX, "-std=c++17", *WARNINGS, "-Wpedantic", "-fsyntax-only", "-I", built.include,
         source])
