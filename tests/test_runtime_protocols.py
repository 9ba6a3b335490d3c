"""Reading arguments: DLPack capsules, the CUDA array interface, dtypes and scalars."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest

from buildtile.errors import TypeMismatchError
from buildtile.runtime import dlpack
from buildtile.runtime.arrays import DEVICE, HOST, UNKNOWN, array_view
from buildtile.runtime.dtypes import (
    ScalarRefused,
    from_dlpack,
    from_typestr,
    scalar_converter,
)
from buildtile.runtime.testing import FakeCudaArray, FakeDLPackArray

# ----------------------------------------------------------------------------- DLPack


@pytest.mark.parametrize("versioned", [True, False])
def test_dlpack_capsule_is_read_and_released_exactly_once(versioned):
    producer = FakeDLPackArray(0x7F00_0000_1000, (4, 6), strides=(12, 2), device=(2, 3), versioned=versioned,
                               byte_offset=64)
    view = array_view(producer, 0)
    assert (view.ptr, view.shape, view.strides) == (0x7F00_0000_1040, (4, 6), (12, 2))
    assert (view.dtype, view.itemsize, view.device, view.memory) == ("f32", 4, 3, DEVICE)
    assert producer.exported == 1 and producer.released == 0  # the view keeps the capsule alive
    del view
    gc.collect()
    assert producer.released == 1


def test_dlpack_producer_is_given_the_launch_stream():
    producer = FakeDLPackArray(0x7F00_0000_1000, (4,))
    array_view(producer, 0)
    assert producer.last_stream == 1  # the legacy default stream, in the protocol's encoding
    array_view(producer, 0xBEEF)
    assert producer.last_stream == 0xBEEF


class _BothProtocols(FakeDLPackArray):
    """Offers a stream-less array interface too, as JAX arrays do."""

    @property
    def __cuda_array_interface__(self):
        return {"version": 2, "shape": self.shape, "typestr": "<f4", "data": (0x1234_0000, False)}


def test_dlpack_is_preferred_over_a_stream_less_array_interface():
    producer = _BothProtocols(0x7F00_0000_2000, (4,))
    view = array_view(producer, 0xBEEF)
    assert producer.last_stream == 0xBEEF   # the producer was asked to order its work first
    assert view.ptr == 0x7F00_0000_2000     # and its tensor, not the interface's pointer, is read


def test_dlpack_compact_tensor_gets_row_major_strides():
    view = array_view(FakeDLPackArray(0x7F00_0000_1000, (2, 3, 4)), 0)
    assert view.strides == (12, 4, 1)


def test_dlpack_read_only_and_copied_tensors_are_marked_read_only():
    assert array_view(FakeDLPackArray(0x1000, (4,), flags=dlpack.FLAG_READ_ONLY), 0).read_only
    assert array_view(FakeDLPackArray(0x1000, (4,), flags=dlpack.FLAG_IS_COPIED), 0).read_only
    assert not array_view(FakeDLPackArray(0x1000, (4,)), 0).read_only


def test_dlpack_bfloat16_is_recognised():
    view = array_view(FakeDLPackArray(0x1000, (4,), dtype=(4, 16, 1)), 0)
    assert (view.dtype, view.itemsize) == ("bf16", 2)


def test_dlpack_cpu_tensor_is_a_host_view_without_a_capsule():
    producer = FakeDLPackArray(0x1000, (4,), device=(1, 0))
    view = array_view(producer, 0)
    assert view.memory == HOST and "on cpu" in view.describe()
    assert producer.exported == 0


def test_numpy_array_is_host_memory():
    view = array_view(np.zeros((3, 2), np.float64), 0)
    assert view.memory == HOST and view.describe() == "float64 NumPy array of shape (3, 2) in host memory"


def test_dlpack_refused_capsule_raises_value_error():
    class Consumed:
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, stream=None, max_version=None):
            return "not a capsule"

    with pytest.raises(ValueError, match="unconsumed DLPack capsule"):
        array_view(Consumed(), 0)


def test_dlpack_producer_without_max_version_is_supported():
    inner = FakeDLPackArray(0x1000, (4,), versioned=False)

    class Old:
        def __dlpack_device__(self):
            return inner.__dlpack_device__()

        def __dlpack__(self, stream=None):
            return inner.__dlpack__(stream=stream)

    assert array_view(Old(), 0).shape == (4,)


def test_dlpack_launch_end_to_end(ops, fake_gpu):
    a = FakeDLPackArray(fake_gpu.allocate(40), (10,))
    b = FakeDLPackArray(fake_gpu.allocate(40), (10,))
    c = FakeDLPackArray(fake_gpu.allocate(40), (10,))
    ops.vecadd[1](a, b, c, stream=3)
    assert [p.last_stream for p in (a, b, c)] == [3, 3, 3]
    assert ops.vecadd.signature.layout.struct.unpack(fake_gpu.launches[-1].params) == (
        a.ptr, 10, b.ptr, 10, c.ptr, 10)
    gc.collect()
    assert [p.released for p in (a, b, c)] == [1, 1, 1]
    assert not any(call[0] == "pointer_memory" for call in fake_gpu.calls)  # DLPack names the device


def test_dlpack_read_only_output_is_refused(ops, fake_gpu):
    out = FakeDLPackArray(fake_gpu.allocate(40), (10,), flags=dlpack.FLAG_READ_ONLY)
    with pytest.raises(TypeMismatchError, match="read-only"):
        ops.vecadd[1](fake_gpu.array(10), fake_gpu.array(10), out)


# ----------------------------------------------------------------------------- CUDA array interface

def test_array_interface_v2_without_strides():
    view = array_view(FakeCudaArray(0x1000, (3, 4), "<f8", version=2), 0)
    assert (view.strides, view.dtype, view.memory, view.stream) == ((4, 1), "f64", UNKNOWN, None)


def test_array_interface_instance_attribute_is_found():
    class Holder:
        def __init__(self):
            self.__cuda_array_interface__ = {"shape": (5,), "typestr": "<i4", "data": (0x2000, False),
                                             "version": 3}

    view = array_view(Holder(), 0)
    assert (view.ptr, view.dtype, view.shape) == (0x2000, "i32", (5,))


def test_masked_array_interface_is_refused():
    class Masked:
        __cuda_array_interface__ = {"shape": (5,), "typestr": "<f4", "data": (0x2000, False), "version": 3,
                                    "mask": object()}

    with pytest.raises(ValueError, match="mask"):
        array_view(Masked(), 0)


def test_views_know_their_byte_range_and_overlap():
    base = FakeCudaArray(0x1000, (4, 4), "<f4")
    assert array_view(base, 0).byte_range() == (0x1000, 0x1040)
    reversed_rows = FakeCudaArray(0x1030, (4, 4), "<f4", strides=(-16, 4))
    assert array_view(reversed_rows, 0).byte_range() == (0x1000, 0x1040)
    assert array_view(FakeCudaArray(0x1000, (4, 0), "<f4"), 0).byte_range() == (0x1000, 0x1000)
    assert array_view(FakeCudaArray(0x1000, (4, 4), "<f4", strides=(0, 4)), 0).overlaps_itself()
    assert array_view(FakeCudaArray(0x1000, (4, 4), "<f4", strides=(8, 4)), 0).overlaps_itself()
    assert not array_view(FakeCudaArray(0x1000, (4, 4), "<f4", strides=(4, 16)), 0).overlaps_itself()
    assert not array_view(FakeCudaArray(0x1000, (1, 4), "<f4", strides=(0, 4)), 0).overlaps_itself()


# ----------------------------------------------------------------------------- dtypes

@pytest.mark.parametrize("typestr, name", [
    ("<f4", "f32"), ("<f8", "f64"), ("<f2", "f16"), ("<V2", "bf16"), ("|b1", "bool"), ("<i4", "i32"),
    ("<i8", "i64"), ("<u4", "u32"), ("<u8", "u64"), ("=f4", "f32"), ("|i1", "i8"), ("<u2", "u16"),
    ("|u1", "u8"), ("<i2", "i16"), ("<c8", "complex64"), ("<f16", "float128"), (">f4", "big-endian float32"),
])
def test_typestr_names(typestr, name):
    assert from_typestr(typestr)[0] == name


@pytest.mark.parametrize("triple, name", [
    ((2, 32, 1), "f32"), ((4, 16, 1), "bf16"), ((6, 8, 1), "bool"), ((1, 64, 1), "u64"),
    ((0, 8, 1), "i8"), ((1, 16, 1), "u16"), ((0, 128, 1), "int128"), ((2, 32, 4), "float32x4"), ((5, 64, 1), "complex64"),
])
def test_dlpack_dtype_names(triple, name):
    assert from_dlpack(*triple)[0] == name


def test_f16_and_bf16_scalars_round_to_nearest():
    assert scalar_converter("f16")(1.0) == 0x3C00
    assert scalar_converter("bf16")(1.0) == 0x3F80
    assert scalar_converter("bf16")(1.00390625) == 0x3F80   # a tie rounds to even
    assert scalar_converter("bf16")(1.01171875) == 0x3F82   # a tie rounds to even (up)
    assert scalar_converter("bf16")(-2.0) == 0xC000
    assert scalar_converter("bf16")(math.inf) == 0x7F80
    with pytest.raises(ScalarRefused):
        scalar_converter("f16")(70000.0)
    with pytest.raises(ScalarRefused):
        scalar_converter("bf16")(1e39)


def test_integer_scalars_accept_numpy_integers_and_refuse_floats():
    to_u64 = scalar_converter("u64")
    assert to_u64(np.uint64(2**64 - 1)) == 2**64 - 1
    with pytest.raises(ScalarRefused):
        to_u64(-1)
    with pytest.raises(ScalarRefused):
        to_u64(np.float32(1))


def test_bool_scalar_accepts_only_bools():
    to_bool = scalar_converter("bool")
    assert (to_bool(True), to_bool(np.bool_(False))) == (1, 0)
    with pytest.raises(ScalarRefused):
        to_bool(1)


def test_nan_and_inf_pass_as_floats():
    assert math.isnan(scalar_converter("f32")(math.nan))
    assert scalar_converter("f64")(-math.inf) == -math.inf
