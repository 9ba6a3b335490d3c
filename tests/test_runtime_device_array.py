"""buildtile's own DeviceArray, over the fake driver's host-backed memory."""

from __future__ import annotations

import numpy as np
import pytest

from buildtile.errors import BuildtileError
from buildtile.runtime import DeviceArray
from buildtile.runtime.arrays import array_view


def test_round_trip_through_numpy(fake_gpu):
    host = np.arange(12, dtype=np.float64).reshape(3, 4)
    array = DeviceArray.from_numpy(host)
    assert (array.shape, array.dtype, array.nbytes, array.strides) == ((3, 4), np.float64, 96, (32, 8))
    np.testing.assert_array_equal(array.to_numpy(), host)


def test_from_numpy_makes_non_contiguous_input_contiguous(fake_gpu):
    host = np.arange(20, dtype=np.int32)[::2]
    np.testing.assert_array_equal(DeviceArray.from_numpy(host).to_numpy(), host)


def test_empty_zeros_and_fill(fake_gpu):
    array = DeviceArray.zeros(5, "i64")
    np.testing.assert_array_equal(array.to_numpy(), np.zeros(5, np.int64))
    array.fill_bytes(0xFF)
    np.testing.assert_array_equal(array.to_numpy(), np.full(5, -1, np.int64))
    assert DeviceArray.empty((2, 0), "f32").nbytes == 0


def test_copy_from_numpy_checks_the_shape(fake_gpu):
    array = DeviceArray.empty(4, "f32")
    array.copy_from_numpy([1, 2, 3, 4])
    np.testing.assert_array_equal(array.to_numpy(), np.array([1, 2, 3, 4], np.float32))
    with pytest.raises(BuildtileError, match=r"cannot copy shape \(3,\) into shape \(4,\)"):
        array.copy_from_numpy([1, 2, 3])


def test_bf16_crosses_from_and_to_numpy_as_float32(fake_gpu):
    values = np.array([1.0, 1 + 2**-8, 1 + 2**-8 + 2**-9, -2.5, 3.14159, np.inf, np.nan], np.float32)
    array = DeviceArray.from_numpy(values, dtype="bf16")
    assert (array.nbytes, repr(array)) == (14, "DeviceArray(shape=(7,), dtype=bf16, device=0)")
    assert array.__cuda_array_interface__["typestr"] == "|V2"     # the typestr the runtime reads as bf16
    assert array_view(array, 0).dtype == "bf16"
    back = array.to_numpy()
    assert back.dtype == np.float32
    # nearest, ties to even: 1 + 2**-8 is halfway and goes down, a little more goes up
    np.testing.assert_array_equal(back[:6], [1.0, 1.0, 1 + 2**-7, -2.5, 3.140625, np.inf])
    assert np.isnan(back[6])
    array.copy_from_numpy([0.5, 2, 3, 4, 5, 6, 7])
    np.testing.assert_array_equal(array.to_numpy(), [0.5, 2, 3, 4, 5, 6, 7])
    np.testing.assert_array_equal(DeviceArray.zeros(3, "bf16").to_numpy(), np.zeros(3, np.float32))


def test_array_interface_describes_the_allocation(fake_gpu):
    array = DeviceArray.empty((2, 3), "u32", device=0)
    cai = array.__cuda_array_interface__
    assert cai == {"version": 3, "shape": (2, 3), "typestr": "<u4", "data": (array.ptr, False),
                   "strides": None, "stream": None}
    view = array_view(array, 0)
    assert (view.dtype, view.strides, view.device) == ("u32", (3, 1), 0)


def test_free_releases_once_and_a_freed_array_is_refused(ops, fake_gpu):
    a, b, c = (DeviceArray.empty(8) for _ in range(3))
    c.free()
    c.free()
    assert [call[0] for call in fake_gpu.calls].count("mem_free") == 1
    with pytest.raises(BuildtileError, match="null"):
        ops.vecadd[1](a, b, c)


def test_bad_shapes_and_dtypes(fake_gpu):
    with pytest.raises(BuildtileError, match="negative"):
        DeviceArray.empty(-1)
    with pytest.raises(BuildtileError, match="not a dtype"):
        DeviceArray.empty(4, "float128x")


def test_kernel_launch_on_device_arrays(ops, fake_gpu):
    x = DeviceArray.from_numpy(np.arange(6, dtype=np.int64))
    out = DeviceArray.empty(6, "i32")
    ops.collatz_steps[1](x, 100, out)
    values = ops.collatz_steps.signature.layout.struct.unpack(fake_gpu.launches[-1].params)
    assert values == (x.ptr, 6, 100, out.ptr, 6)
    assert not any(call[0] == "pointer_memory" for call in fake_gpu.calls)  # the array knows its device
