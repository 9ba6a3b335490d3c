"""Complex arrays in both hosts' argument checks: NumPy-layout complex64/complex128 buffers
(``__cuda_array_interface__`` typestrs ``<c8``/``<c16``, DLPack type code 5) bind to
``Slice[complex64]``/``Slice[complex128]`` parameters and nothing else, on a fake GPU."""

from __future__ import annotations

import pytest

from buildtile.errors import TypeMismatchError
from buildtile.runtime.dtypes import from_dlpack, from_typestr

KERNELS = {
    "scale": dict(params=[("z", "slice", "complex64"), ("out", "disjoint_slice", "complex128")],
                  requires=["len(z) == len(out)"]),
}
SOURCE = "from buildtile import simt\n\n\n@simt.kernel\ndef scale(z, out):\n    pass\n"


@pytest.fixture
def ops(make_kernel_package, fake_gpu):
    return make_kernel_package(SOURCE, KERNELS)


def test_complex_typestrs_and_dlpack_codes_name_the_abi_dtypes():
    assert from_typestr("<c8") == ("complex64", 8)
    assert from_typestr("<c16") == ("complex128", 16)
    assert from_dlpack(5, 64, 1) == ("complex64", 8)
    assert from_dlpack(5, 128, 1) == ("complex128", 16)


def test_complex_arrays_bind_and_pass_pointer_and_length(ops, fake_gpu):
    z = fake_gpu.array(100, "complex64")
    out = fake_gpu.array(100, "complex128")
    ops.scale[1](z, out)
    (launch,) = fake_gpu.launches
    assert [launch.param(k, "q") for k in range(4)] == [z.ptr, 100, out.ptr, 100]


def test_a_float_array_is_not_a_complex_one(ops, fake_gpu):
    with pytest.raises(TypeMismatchError, match="complex64"):
        ops.scale[1](fake_gpu.array(100, "f32"), fake_gpu.array(100, "complex128"))
    with pytest.raises(TypeMismatchError, match="complex128"):
        ops.scale[1](fake_gpu.array(100, "complex64"), fake_gpu.array(100, "complex64"))
    assert fake_gpu.launches == []


def test_a_dlpack_complex_tensor_binds(ops, fake_gpu):
    from buildtile.runtime.testing import FakeDLPackArray

    z = FakeDLPackArray(fake_gpu.allocate(8 * 10), (10,), dtype=(5, 64, 1))
    out = fake_gpu.array(10, "complex128")
    ops.scale[1](z, out)
    assert fake_gpu.launches[-1].param(1, "q") == 10
