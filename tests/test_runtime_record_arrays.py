"""Arrays of records in the Python host's argument checks, on a fake GPU: the records' bytes
(DLPack uint8/int8, the last axis one record) and structured arrays (``__cuda_array_interface__``
typestr ``|V<size>`` with a ``descr``, DeviceArrays of a record's dtype) bind to record
parameters, pass pointer and extents counted in records, and anything else is refused naming
what differs; ``record_dtype`` gives a record's NumPy dtype from its package."""

from __future__ import annotations

import numpy as np
import pytest

from buildtile.errors import AliasingError, BuildtileError, ContractError, TypeMismatchError
from buildtile.runtime.testing import FakeCudaArray, FakeDLPackArray

SOURCE = """\
from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32, f64, i8, i64


@simt.record
class Particle:
    x: f32
    y: f32
    vx: f32
    mass: f64


@simt.record
class Unbuilt:
    x: f32


@simt.kernel
def drift(p, out):
    pass


@simt.kernel
def grid_copy(src, dst):
    pass
"""
PARTICLE = {"size": 24, "align": 8, "fields": [{"name": "x", "dtype": "f32", "offset": 0},
                                               {"name": "y", "dtype": "f32", "offset": 4},
                                               {"name": "vx", "dtype": "f32", "offset": 8},
                                               {"name": "mass", "dtype": "f64", "offset": 16}]}
KERNELS = {
    "drift": dict(params=[("p", "slice", "Particle"), ("out", "disjoint_slice", "Particle")],
                  requires=["len(p) == len(out)"]),
    "grid_copy": dict(params=[("src", "tensor", "Particle", 2), ("dst", "disjoint_tensor", "Particle", 2)],
                      block=(16, 16, 1), index_dims=2),
}
#: NumPy's own description of a Particle: the descr a CUDA array interface of one carries
PARTICLE_DTYPE = np.dtype({"names": ["x", "y", "vx", "mass"], "formats": ["<f4", "<f4", "<f4", "<f8"],
                           "offsets": [0, 4, 8, 16], "itemsize": 24})
U8, I8 = (1, 8, 1), (0, 8, 1)


@pytest.fixture
def ops(make_kernel_package, fake_gpu):
    return make_kernel_package(SOURCE, KERNELS, records={"Particle": PARTICLE})


def structured(fake_gpu, n: int, dtype=PARTICLE_DTYPE, **kwargs) -> FakeCudaArray:
    """A fake CUDA array of ``n`` structured elements (typestr ``|V<size>``, NumPy's descr)."""
    ptr = fake_gpu.allocate(n * dtype.itemsize)
    return FakeCudaArray(ptr, (n,), dtype.str, descr=dtype.descr, **kwargs)


def records_bytes(fake_gpu, shape, code=U8, **kwargs) -> FakeDLPackArray:
    return FakeDLPackArray(fake_gpu.allocate(int(np.prod(shape))), shape, dtype=code, **kwargs)


def refusal(fake_gpu, exc_type, launch, *args) -> str:
    with pytest.raises(exc_type) as info:
        launch(*args)
    assert fake_gpu.launches == []
    return str(info.value)


def test_structured_arrays_with_the_records_fields_bind_as_pointer_and_count(ops, fake_gpu):
    p, out = structured(fake_gpu, 100), structured(fake_gpu, 100)
    ops.drift[1](p, out)
    (launch,) = fake_gpu.launches
    assert [launch.param(k, "q") for k in range(4)] == [p.ptr, 100, out.ptr, 100]


@pytest.mark.parametrize("code", [U8, I8])
def test_the_records_bytes_bind_their_leading_axis_counting_records(ops, fake_gpu, code):
    p, out = records_bytes(fake_gpu, (100, 24), code), records_bytes(fake_gpu, (100, 24), code)
    ops.drift[1](p, out)
    assert [fake_gpu.launches[-1].param(k, "q") for k in range(4)] == [p.ptr, 100, out.ptr, 100]


def test_a_tensor_of_records_passes_strides_counted_in_records(ops, fake_gpu):
    # a transposed view of a 5 x 4 array of records (byte strides 24, 96, 1), and a compact one
    src = records_bytes(fake_gpu, (5, 4, 24), strides=(24, 96, 1))
    src.shape = (4, 5, 24)
    dst = records_bytes(fake_gpu, (4, 5, 24))
    ops.grid_copy[1, 1](src, dst)
    assert [fake_gpu.launches[-1].param(k, "q") for k in range(10)] == [src.ptr, 4, 5, 1, 4, dst.ptr, 4, 5, 5, 1]


def _fields(names, formats, offsets, itemsize=24) -> np.dtype:
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": itemsize})


@pytest.mark.parametrize("other, words", [
    (_fields(["x", "y", "vx", "mass"], ["<f4"] * 4, [0, 4, 8, 12], 16),
     "its field `mass` is float32 at offset 12, but `Particle.mass` is f64 at offset 16"),
    (_fields(["x", "y", "speed", "mass"], ["<f4", "<f4", "<f4", "<f8"], [0, 4, 8, 16]),
     "its elements have no field `vx`; `Particle.vx` is f32 at offset 8"),
    (_fields(["x", "y", "vx", "tag", "mass"], ["<f4", "<f4", "<f4", "<i4", "<f8"], [0, 4, 8, 12, 16]),
     "its field `tag` is not a field of `Particle`"),
    (_fields(["x", "y", "vx", "mass"], ["<f4", "<f4", "<f4", "<f8"], [0, 4, 8, 16], 32),
     "its elements have 32 bytes, but a `Particle` record has 24"),
    (_fields(["x", "y", "vx", "mass"], ["<f4", "<f4", "<f4", ">f8"], [0, 4, 8, 16]),
     "its field `mass` is big-endian float64 at offset 16, but `Particle.mass` is f64 at offset 16"),
    (_fields(["x", "y", "vx", "mass"], ["<f4", "<f4", "(2,)<f4", "<f8"], [0, 4, 8, 16]),
     "its field `vx` is float32 array of shape (2,) at offset 8, but `Particle.vx` is f32 at offset 8"),
])
def test_a_structured_array_of_other_fields_is_refused_naming_the_field(ops, fake_gpu, other, words):
    text = refusal(fake_gpu, TypeMismatchError, ops.drift[1], structured(fake_gpu, 10, other),
                   structured(fake_gpu, 10))
    assert f"parameter `p` of kernel `drift` expects Slice[Particle], got void{other.itemsize * 8} array" in text
    assert f"({words})" in text and "record_dtype(Particle)" in text


def test_a_void_array_without_a_descr_is_not_records(ops, fake_gpu):
    blob = FakeCudaArray(fake_gpu.allocate(240), (10,), "|V24")
    text = refusal(fake_gpu, TypeMismatchError, ops.drift[1], blob, structured(fake_gpu, 10))
    assert "records of `Particle` are passed as their bytes: a uint8 or int8 array of shape (n, 24)" in text


def test_record_arrays_keep_the_other_checks(ops, fake_gpu):
    p = structured(fake_gpu, 100)
    text = refusal(fake_gpu, ContractError, ops.drift[1], p, structured(fake_gpu, 99))
    assert "requires `len(p) == len(out)` but len(p) = 100, len(out) = 99" in text
    text = refusal(fake_gpu, TypeMismatchError, ops.drift[1], p, structured(fake_gpu, 100, readonly=True))
    assert "it is read-only, and the kernel writes it" in text
    overlapping = FakeCudaArray(p.ptr + 24 * 50, (100,), PARTICLE_DTYPE.str, descr=PARTICLE_DTYPE.descr)
    text = refusal(fake_gpu, AliasingError, ops.drift[1], p, overlapping)
    assert "cannot borrow `out` as mutable" in text
    # a structured array's alignment is the record's, not its size
    misaligned = FakeCudaArray(fake_gpu.allocate(24 * 11) + 4, (10,), PARTICLE_DTYPE.str, descr=PARTICLE_DTYPE.descr)
    text = refusal(fake_gpu, TypeMismatchError, ops.drift[1], misaligned, structured(fake_gpu, 10))
    assert f"its first element at {misaligned.ptr:#x} is not aligned to 8 bytes" in text


def test_record_dtype_is_the_layout_the_package_was_built_with(ops):
    from buildtile.runtime import record_dtype

    assert record_dtype(ops.Particle) == PARTICLE_DTYPE
    with pytest.raises(BuildtileError) as info:
        record_dtype(ops.Unbuilt)
    assert info.value.code == "BT0620" and "record `Unbuilt`" in str(info.value)
    with pytest.raises(BuildtileError, match="takes a `@simt.record` class, got 'Particle'"):
        record_dtype("Particle")


def test_device_arrays_of_a_record_hold_records(ops, fake_gpu):
    from buildtile.runtime import DeviceArray

    p = DeviceArray(100, ops.Particle)
    assert p.dtype == PARTICLE_DTYPE and p.__cuda_array_interface__["descr"] == PARTICLE_DTYPE.descr
    out = DeviceArray.from_numpy(np.zeros(100, PARTICLE_DTYPE))
    ops.drift[1](p, out)
    assert [fake_gpu.launches[-1].param(k, "q") for k in range(4)] == [p.ptr, 100, out.ptr, 100]
