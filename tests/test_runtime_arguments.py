"""Every argument refusal happens before anything reaches the GPU (no launch, no copy, no wait)."""

from __future__ import annotations

import numpy as np
import pytest

from buildtile.errors import (
    AliasingError,
    ContractError,
    LaunchError,
    TypeMismatchError,
)
from buildtile.runtime.testing import FakeCudaArray


def refused(fake_gpu, exc_type, launch, *args, **kwargs) -> str:
    """Run a launch that must be refused; check that nothing was queued; return the message."""
    with pytest.raises(exc_type) as info:
        launch(*args, **kwargs)
    assert fake_gpu.queued == []
    assert not any(call[0] == "load_module" for call in fake_gpu.calls)
    text = str(info.value)
    assert f"[{info.value.code}]" in text
    return text


def values_of(fake_gpu, kernel) -> tuple:
    return kernel.signature.layout.struct.unpack(fake_gpu.launches[-1].params)


# ----------------------------------------------------------------------------- accepted

def test_slices_pass_pointer_and_length(ops, fake_gpu):
    a, b, c = fake_gpu.array(1000), fake_gpu.array(1000), fake_gpu.array(1000)
    ops.vecadd[4](a, b, c)
    assert values_of(fake_gpu, ops.vecadd) == (a.ptr, 1000, b.ptr, 1000, c.ptr, 1000)
    record = fake_gpu.launches[-1]
    assert (record.grid, record.block, record.shared_mem, record.stream) == ((4, 1, 1), (256, 1, 1), 0, 0)


def test_tensors_pass_pointer_shape_and_strides_in_elements(ops, fake_gpu):
    base = fake_gpu.array((80, 64))
    a = base.view(0, (37, 20), (64 * 4 * 2, 4))    # every other row
    b = base.view(0, (37, 20), (4, 37 * 4))         # column-major
    c = fake_gpu.array((37, 20))
    ops.matadd[2, 3](a, b, c)
    assert values_of(fake_gpu, ops.matadd) == (
        a.ptr, 37, 20, 128, 1,
        b.ptr, 37, 20, 1, 37,
        c.ptr, 37, 20, 20, 1,
    )


def test_scalars_are_converted_to_the_parameter_type(ops, fake_gpu):
    out = fake_gpu.array(8)
    ops.saxpy[1](2, fake_gpu.array(8), fake_gpu.array(8), out)          # an int is a fine f32
    assert values_of(fake_gpu, ops.saxpy)[0] == 2.0
    ops.scalars[1](True, 1.5, 1.0, np.float64(0.25), np.uint32(7), out)
    flag, h, b, d, u = values_of(fake_gpu, ops.scalars)[:5]
    assert (flag, h, b, d, u) == (1, 0x3E00, 0x3F80, 0.25, 7)          # f16/bf16 travel as bits


def test_empty_arrays_never_alias(ops, fake_gpu):
    a = fake_gpu.array(0)
    ops.vecadd[1](a, a, a)
    assert values_of(fake_gpu, ops.vecadd)[1::2] == (0, 0, 0)


def test_inputs_may_alias_each_other(ops, fake_gpu):
    a, c = fake_gpu.array(10), fake_gpu.array(10)
    ops.vecadd[1](a, a, c)
    assert len(fake_gpu.launches) == 1


def test_kernel_with_no_parameters_launches_on_the_current_device(ops, fake_gpu):
    ops.nothing[1]()
    assert fake_gpu.launches[-1].device == 0
    assert ("current_device", ()) in fake_gpu.calls


# ----------------------------------------------------------------------------- BT0308

def test_wrong_dtype_is_refused_with_both_types(ops, fake_gpu):
    a, b = fake_gpu.array(10), fake_gpu.array(10)
    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], a, b, fake_gpu.array(10, "f64"))
    assert "BT0308 mismatched types" in text.replace("error[BT0308]: ", "BT0308 ")
    assert ("parameter `c` of kernel `vecadd` expects DisjointSlice[f32], "
            "got float64 array of shape (10,)") in text


def test_foreign_dtype_is_named_readably(ops, fake_gpu):
    complex64 = FakeCudaArray(fake_gpu.allocate(80), (10,), "<c8")
    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], complex64, fake_gpu.array(10), fake_gpu.array(10))
    assert "got complex64 array of shape (10,)" in text


def test_an_int8_array_for_a_float_parameter_is_named_as_numpy_names_it(ops, fake_gpu):
    int8 = FakeCudaArray(fake_gpu.allocate(10), (10,), "|i1")
    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], int8, fake_gpu.array(10), fake_gpu.array(10))
    assert "expects Slice[f32], got int8 array of shape (10,)" in text


def test_wrong_rank_is_refused(ops, fake_gpu):
    two_d = fake_gpu.array((4, 4))
    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], two_d, fake_gpu.array(16), fake_gpu.array(16))
    assert "parameter `a`" in text and "shape (4, 4)" in text
    text = refused(fake_gpu, TypeMismatchError, ops.matadd[1, 1],
                   fake_gpu.array(4), fake_gpu.array((4, 4)), fake_gpu.array((4, 4)))
    assert "expects Tensor[f32, 2]" in text


def test_non_contiguous_slice_is_refused(ops, fake_gpu):
    base = fake_gpu.array(20)
    strided = base.view(0, (10,), (8,))
    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], strided, fake_gpu.array(10), fake_gpu.array(10))
    assert "not contiguous" in text and "parameter `a`" in text


def test_byte_strides_that_are_not_whole_elements_are_refused(ops, fake_gpu):
    odd = fake_gpu.array((4, 4)).view(0, (4, 4), (6, 4))
    text = refused(fake_gpu, TypeMismatchError, ops.matadd[1, 1], odd, fake_gpu.array((4, 4)),
                   fake_gpu.array((4, 4)))
    assert "not multiples of the element size" in text


def test_broadcast_output_tensor_is_refused(ops, fake_gpu):
    row = fake_gpu.array((1, 16))
    broadcast = row.view(0, (16, 16), (0, 4))
    text = refused(fake_gpu, TypeMismatchError, ops.matadd[1, 1], fake_gpu.array((16, 16)),
                   fake_gpu.array((16, 16)), broadcast)
    assert "write the same element" in text


def test_broadcast_input_tensor_is_accepted(ops, fake_gpu):
    row = fake_gpu.array((1, 16))
    b, c = fake_gpu.array((16, 16)), fake_gpu.array((16, 16))
    ops.matadd[1, 1](row.view(0, (16, 16), (0, 4)), b, c)
    assert len(fake_gpu.launches) == 1
    # the zero stride reaches the kernel as is: every row of `a` reads the same 16 elements
    assert values_of(fake_gpu, ops.matadd)[:5] == (row.ptr, 16, 16, 0, 1)


def test_host_numpy_array_is_refused(ops, fake_gpu):
    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], np.zeros(10, np.float32),
                   fake_gpu.array(10), fake_gpu.array(10))
    assert "float32 NumPy array of shape (10,) in host memory" in text


def test_host_pointer_behind_the_array_interface_is_refused_before_launch(ops, fake_gpu):
    host = np.zeros(10, np.float32)
    disguised = FakeCudaArray(host.ctypes.data, (10,), "<f4")
    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], disguised, fake_gpu.array(10),
                   fake_gpu.array(10))
    assert "in host memory" in text and "parameter `a`" in text


def test_read_only_output_is_refused(ops, fake_gpu):
    out = fake_gpu.array(10, readonly=True)
    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], fake_gpu.array(10), fake_gpu.array(10), out)
    assert "read-only" in text


def test_read_only_input_is_accepted(ops, fake_gpu):
    ops.vecadd[1](fake_gpu.array(10, readonly=True), fake_gpu.array(10), fake_gpu.array(10))
    assert len(fake_gpu.launches) == 1


def test_null_pointer_is_refused(ops, fake_gpu):
    null = FakeCudaArray(0, (10,), "<f4")
    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], fake_gpu.array(10), fake_gpu.array(10), null)
    assert "null" in text


def test_wrong_argument_count_is_refused(ops, fake_gpu):
    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], fake_gpu.array(10), fake_gpu.array(10))
    assert "kernel `vecadd` takes 3 arguments (a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]), got 2" in text


def test_not_an_array_is_refused(ops, fake_gpu):
    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], [1.0, 2.0], fake_gpu.array(2), fake_gpu.array(2))
    assert "got list (not a GPU array)" in text


def test_failing_producer_is_reported_not_raised_through(ops, fake_gpu):
    class Broken:
        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("device was reset")

    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], Broken(), fake_gpu.array(2), fake_gpu.array(2))
    assert "RuntimeError: device was reset" in text


def test_malformed_array_interface_is_refused(ops, fake_gpu):
    class Malformed:
        __cuda_array_interface__ = {"shape": (3,), "typestr": "<f4"}

    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], Malformed(), fake_gpu.array(3), fake_gpu.array(3))
    assert "malformed __cuda_array_interface__" in text


@pytest.mark.parametrize("value, why", [
    (2**31, "does not fit in i32"),
    (-(2**31) - 1, "does not fit in i32"),
    (1.5, "expected an integer"),
    (True, "expected an integer"),
    ("7", "expected an integer"),
])
def test_integer_scalar_must_fit(ops, fake_gpu, value, why):
    text = refused(fake_gpu, TypeMismatchError, ops.collatz_steps[1],
                   fake_gpu.array(4, "i64"), value, fake_gpu.array(4, "i32"))
    assert why in text and "parameter `limit`" in text


@pytest.mark.parametrize("value, why", [
    (1e39, "out of range for f32"),
    ("2", "expected a float"),
    (None, "expected a float"),
    (10**400, "out of range for f32"),
])
def test_float_scalar_must_be_a_representable_number(ops, fake_gpu, value, why):
    text = refused(fake_gpu, TypeMismatchError, ops.saxpy[1], value, fake_gpu.array(4), fake_gpu.array(4),
                   fake_gpu.array(4))
    assert why in text and "parameter `alpha`" in text


def test_arguments_on_different_devices_are_refused_naming_both(ops, fake_gpu):
    fake_gpu.capabilities.append((9, 0))
    a, b = fake_gpu.array(10, device=0), fake_gpu.array(10, device=1)
    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], a, b, fake_gpu.array(10, device=0))
    assert "`a` is on cuda:0, `b` is on cuda:1" in text


def test_devices_known_to_the_producer_are_compared_without_the_driver(ops, fake_gpu):
    class OnDevice(FakeCudaArray):
        """An array whose producer says which device it is on (as DLPack and PyTorch do)."""

    from buildtile.runtime import arrays

    def view(obj, stream):
        v = arrays.view_from_cai(obj, obj.__cuda_array_interface__)
        v.device, v.memory = obj.device, arrays.DEVICE
        return v

    arrays.register_extractor(OnDevice, view)
    a = OnDevice(fake_gpu.allocate(40), (10,))
    a.device = 0
    c = OnDevice(fake_gpu.allocate(40), (10,))
    c.device = 3
    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], a, a, c)
    assert "`a` is on cuda:0, `c` is on cuda:3" in text
    assert not any(call[0] == "pointer_memory" for call in fake_gpu.calls)


# ----------------------------------------------------------------------------- BT0502

def test_output_passed_as_input_is_refused(ops, fake_gpu):
    a, c = fake_gpu.array(10), fake_gpu.array(10)
    text = refused(fake_gpu, AliasingError, ops.vecadd[1], a, c, c)
    assert "cannot borrow `c` as mutable because it is also borrowed as immutable (as `b`)" in text
    assert "the same array is passed as `c` and as `b`" in text


def test_overlapping_views_are_refused(ops, fake_gpu):
    base = fake_gpu.array(20)
    first, shifted = base.view(0, (10,)), base.view(5, (10,))
    text = refused(fake_gpu, AliasingError, ops.vecadd[1], shifted, fake_gpu.array(10), first)
    assert "`c` (bytes" in text and "overlaps `a`" in text


def test_adjacent_views_are_accepted(ops, fake_gpu):
    base = fake_gpu.array(20)
    ops.vecadd[1](base.view(0, (10,)), base.view(0, (10,)), base.view(10, (10,)))
    assert len(fake_gpu.launches) == 1


def test_interleaved_views_count_as_overlapping(ops, fake_gpu):
    base = fake_gpu.array((8, 8))
    even = base.view(0, (4, 8), (64, 4))
    odd = base.view(8, (4, 8), (64, 4))
    text = refused(fake_gpu, AliasingError, ops.matadd[1, 1], even, fake_gpu.array((4, 8)), odd)
    assert "BT0502" in text


def test_atomic_output_may_not_alias_an_input(ops, fake_gpu):
    bins = fake_gpu.array(16, "u32")
    text = refused(fake_gpu, AliasingError, ops.histogram[1], bins, bins)
    assert "cannot borrow `bins` as mutable" in text


def test_alias_through_another_object_over_the_same_memory(ops, fake_gpu):
    c = fake_gpu.array(10)
    text = refused(fake_gpu, AliasingError, ops.vecadd[1], c.view(), fake_gpu.array(10), c)
    assert "overlaps `a`" in text


# ----------------------------------------------------------------------------- BT0600 requires

def test_requires_shows_the_relation_and_the_values(ops, fake_gpu):
    text = refused(fake_gpu, ContractError, ops.vecadd[4], fake_gpu.array(1000), fake_gpu.array(1000),
                   fake_gpu.array(999))
    assert "requires `len(a) == len(c)` but len(a) = 1000, len(c) = 999" in text


def test_requires_over_tensor_shapes(ops, fake_gpu):
    text = refused(fake_gpu, ContractError, ops.matadd[1, 1], fake_gpu.array((4, 5)), fake_gpu.array((4, 6)),
                   fake_gpu.array((4, 6)))
    assert "requires `a.shape[1] == c.shape[1]` but a.shape[1] = 5, c.shape[1] = 6" in text


def test_requires_over_an_integer_scalar(ops, fake_gpu):
    text = refused(fake_gpu, ContractError, ops.fill_prefix[1], 11, fake_gpu.array(10, "i64"))
    assert "requires `n <= len(out)` but n = 11, len(out) = 10" in text


def test_requires_short_circuits_left_to_right(ops, fake_gpu):
    ops.fill_prefix[1](0, fake_gpu.array(10, "i64"))  # `n == 0 or len(out) // n >= 1`: no division
    assert len(fake_gpu.launches) == 1


def test_requires_with_an_empty_array(ops, fake_gpu):
    text = refused(fake_gpu, ContractError, ops.polyval_abs[1], fake_gpu.array(0, "f64"),
                   fake_gpu.array(3, "f64"), fake_gpu.array(3, "f64"))
    assert "requires `len(coeffs) >= 1` but len(coeffs) = 0" in text


def test_refusal_errors_share_the_launch_error_base(ops, fake_gpu):
    with pytest.raises(LaunchError):
        ops.vecadd[1](fake_gpu.array(1), fake_gpu.array(1), fake_gpu.array(2))
