"""Launches the checks refuse, on a fake GPU, through both launch paths (``fake_gpu`` runs each
test with the Python way and with the compiled one): grids and blocks that are not integers,
stream handles out of range, layouts the kernel ABI cannot hold, misaligned pointers, keyword
arguments, and prepared launches made or changed other than by ``prepare()``. Each refusal has
its BT code and leaves nothing queued.
"""

from __future__ import annotations

import numpy as np
import pytest

from buildtile.errors import ContractError, TypeMismatchError
from buildtile.runtime import DeviceArray
from buildtile.runtime.launch import CheckedPreparedLaunch, PreparedLaunch
from buildtile.runtime.native import compiled
from buildtile.runtime.testing import FakeCudaArray


def refused(fake_gpu, exc_type, code: str, fn, *args, **kwargs) -> str:
    before = list(fake_gpu.queued)
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    assert fake_gpu.queued == before  # nothing queued by the refused call
    assert str(info.value).startswith(f"error[{code}]: ")
    return str(info.value)


def vec(fake_gpu, n=1000, dtype="f32"):
    return fake_gpu.array(n, dtype), fake_gpu.array(n, dtype), fake_gpu.array(n, dtype)


# ----------------------------------------------------------------------------- grids and blocks

NOT_EXTENTS = [1.0, True, False, np.float64(2.0), np.bool_(True), b"\x01", bytearray(b"\x01"), range(1, 3),
               "4", None, (1.0,), (True,), (1, 2.0), (np.bool_(True),), [1.5], (b"\x01",), ((1,),), ()]


@pytest.mark.parametrize("grid", NOT_EXTENTS, ids=repr)
def test_a_grid_that_is_not_integers_is_refused_with_bt0600(ops, fake_gpu, grid):
    a, b, c = vec(fake_gpu)
    refused(fake_gpu, ContractError, "BT0600", ops.vecadd.prepare, grid=grid)
    refused(fake_gpu, ContractError, "BT0600", lambda: ops.vecadd[grid](a, b, c))


@pytest.mark.parametrize("grid", [1.0, True, (1.0,), (True,), (1.0, 1), (np.bool_(True),), (1 + 0j,)], ids=repr)
def test_a_cached_integer_grid_does_not_answer_for_a_value_that_equals_it(ops, fake_gpu, grid):
    a, b, c = vec(fake_gpu)
    ops.vecadd[(1,)](a, b, c)
    ops.vecadd[1](a, b, c)
    ops.vecadd[(1, 1)](a, b, c)
    launched = len(fake_gpu.launches)
    refused(fake_gpu, ContractError, "BT0600", lambda: ops.vecadd[grid](a, b, c))
    assert len(fake_gpu.launches) == launched


@pytest.mark.parametrize("grid", [np.int64(4), (np.int32(4),), (np.uint8(4), 1), [4], (4, np.int16(1))], ids=repr)
def test_numpy_integers_and_lists_are_grids_as_ints_are(ops, fake_gpu, grid):
    a, b, c = vec(fake_gpu)
    ops.vecadd[4](a, b, c)
    ops.vecadd[grid](a, b, c)
    assert fake_gpu.launches[-1].grid == fake_gpu.launches[-2].grid
    assert ops.vecadd.prepare(grid=grid).grid == (4, 1, 1)
    assert type(ops.vecadd.prepare(grid=grid).grid[0]) is int


@pytest.mark.parametrize("block", [128.0, (True,), range(128, 129), b"\x80", (128, 1.0), None], ids=repr)
def test_an_unsafe_block_that_is_not_integers_is_refused_with_bt0600(ops, fake_gpu, block):
    src, dst, _ = vec(fake_gpu)
    refused(fake_gpu, ContractError, "BT0600", ops.raw_copy.unsafe_launch, 8, block, src, dst)


def test_a_block_that_is_not_integers_is_refused_against_the_contract(ops, fake_gpu):
    refused(fake_gpu, ContractError, "BT0600", ops.vecadd.prepare, grid=4, block=(256.0,))
    assert ops.vecadd.prepare(grid=4, block=(np.int64(256),)).block == (256, 1, 1)


# ----------------------------------------------------------------------------- streams

class StreamGiving:
    def __init__(self, handle) -> None:
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)

    def __repr__(self) -> str:   # the test ids: the same in every process (pytest-xdist compares them)
        return f"StreamGiving({self.handle!r})"


@pytest.mark.parametrize("stream, words", [
    (-1, "cannot be negative"),
    (2**64, "does not fit 64 bits"),
    (2**70, "does not fit 64 bits"),
    (1.0, "does not accept"),
    (True, "does not accept"),
    (StreamGiving(2**70), "does not fit 64 bits"),
    (StreamGiving(-3), "cannot be negative"),
    (StreamGiving(7.0), "not an integer"),
    (StreamGiving(None), "not an integer"),
], ids=repr)
def test_a_stream_handle_out_of_range_is_refused_with_bt0308(ops, fake_gpu, stream, words):
    a, b, c = vec(fake_gpu)
    launch = ops.vecadd.prepare(grid=4)
    text = refused(fake_gpu, TypeMismatchError, "BT0308", launch, a, b, c, stream=stream)
    assert words in text
    launch(a, b, c)
    launch(a, b, c)  # armed, where the compiled way is in use
    text = refused(fake_gpu, TypeMismatchError, "BT0308", launch, a, b, c, stream=stream)
    assert words in text


def test_the_largest_stream_handle_is_taken(ops, fake_gpu):
    a, b, c = vec(fake_gpu)
    for stream in (2**64 - 1, np.uint64(2**64 - 1), StreamGiving(2**63)):
        ops.vecadd[4](a, b, c, stream=stream)
        assert fake_gpu.launches[-1].stream == int(getattr(stream, "handle", stream))


# ----------------------------------------------------------------------------- keyword arguments

@pytest.mark.parametrize("keywords", [{"c": None}, {"streams": 0}, {"stream": 0, "grid": 4}], ids=repr)
def test_keyword_arguments_are_refused_with_bt0308_first_and_armed(ops, fake_gpu, keywords):
    a, b, c = vec(fake_gpu)
    launch = ops.vecadd.prepare(grid=4)
    args = (a, b) if "c" in keywords else (a, b, c)
    kwargs = {k: (c if k == "c" else v) for k, v in keywords.items()}
    text = refused(fake_gpu, TypeMismatchError, "BT0308", launch, *args, **kwargs)
    assert "by position" in text
    launch(a, b, c)
    launch(a, b, c)
    refused(fake_gpu, TypeMismatchError, "BT0308", launch, *args, **kwargs)


# ----------------------------------------------------------------------------- layouts and alignment

@pytest.mark.parametrize("shape, strides, words", [
    ((-16,), None, "negative extent"),
    ((2**63,), None, "more elements than int64 counts"),
    ((16,), (2**63 * 4,), "a stride that int64 cannot hold"),
    ((16,), (2**61 * 4,), "spans more memory than int64 counts"),
], ids=repr)
def test_a_layout_the_abi_cannot_hold_is_refused_without_a_relating_requires(ops, fake_gpu, shape, strides, words):
    data = fake_gpu.array(16, "u32")
    bins = FakeCudaArray(fake_gpu.allocate(64), shape, "<u4", strides)
    text = refused(fake_gpu, TypeMismatchError, "BT0308", lambda: ops.histogram[1](data, bins))
    assert "`bins`" in text and words in text


@pytest.mark.parametrize("field, value", [("shape", (16.5,)), ("shape", (True,)), ("data", (1.5, False)),
                                          ("strides", ("4",))], ids=repr)
def test_an_array_description_with_fields_that_are_not_integers_is_refused(ops, fake_gpu, field, value):
    data = fake_gpu.array(16, "u32")
    bins = fake_gpu.array(16, "u32")
    cai = dict(bins.__cuda_array_interface__, **{field: value})
    described = type("Described", (), {"__cuda_array_interface__": cai})()
    text = refused(fake_gpu, TypeMismatchError, "BT0308", lambda: ops.histogram[1](data, described))
    assert "not an integer" in text


def test_a_data_pointer_past_64_bits_is_refused(ops, fake_gpu):
    data = fake_gpu.array(16, "u32")
    text = refused(fake_gpu, TypeMismatchError, "BT0308", lambda: ops.histogram[1](data, FakeCudaArray(2**64, (16,), "<u4")))
    assert "not a 64-bit address" in text


@pytest.mark.parametrize("dtype, misalign", [("f32", 2), ("f32", 1), ("f64", 4), ("i64", 2)])
def test_every_misaligned_pointer_is_refused_with_bt0308(ops, fake_gpu, dtype, misalign):
    """Each parameter of each kernel, misaligned by less than its element."""
    kernels = {"f32": ("vecadd", 3), "f64": ("polyval_abs", 3), "i64": ("collatz_steps", None)}
    name, count = kernels[dtype]
    kernel = getattr(ops, name)
    for k, p in enumerate(kernel.signature.params):
        if not p.is_array or p.dtype != dtype:
            continue
        args = [fake_gpu.array(64, q.dtype) if q.is_array else 3 for q in kernel.signature.params]
        bad = args[k]
        args[k] = FakeCudaArray(bad.ptr + misalign, bad.shape, bad.typestr)
        text = refused(fake_gpu, TypeMismatchError, "BT0308", lambda: kernel[1](*args))
        assert f"`{p.name}`" in text and "not aligned to" in text


def test_misaligned_device_arrays_are_refused_where_the_fast_binder_reads_them(ops, fake_gpu):
    a, b, c = (DeviceArray.zeros(100) for _ in range(3))
    launch = ops.vecadd[1]
    launch(a, b, c)
    launch(a, b, c)
    launched = len(fake_gpu.launches)
    b.ptr += 2
    try:
        text = refused(fake_gpu, TypeMismatchError, "BT0308", launch, a, b, c)
        assert "`b`" in text and "not aligned to 4 bytes" in text
    finally:
        b.ptr -= 2
    launch(a, b, c)
    assert len(fake_gpu.launches) == launched + 1


# ----------------------------------------------------------------------------- forging and re-pointing

def test_a_prepared_launch_is_made_only_by_prepare(ops, fake_gpu):
    real = ops.vecadd.prepare(grid=4)
    for cls in (PreparedLaunch, CheckedPreparedLaunch, type(real)):
        for args in [(ops.vecadd, (4, 7, 1), (256, 1, 1), 0), (object(), ops.vecadd, (4, 7, 1), (256, 1, 1), 0)]:
            refused(fake_gpu, ContractError, "BT0600", cls, *args)
        refused(fake_gpu, ContractError, "BT0600", cls.__new__, cls, None)
    if compiled is not None:
        with pytest.raises(TypeError, match="kernel.prepare"):
            compiled.FastLaunch()


@pytest.mark.parametrize("name", ["kernel", "grid", "block", "shared_mem", "unsafe", "_signature", "_bind",
                                  "_pack", "_extras", "_offsets", "_last", "_config", "anything"])
def test_a_prepared_launch_cannot_be_re_pointed(ops, fake_gpu, name):
    a, b, c = vec(fake_gpu)
    launch = ops.vecadd.prepare(grid=4)
    launch(a, b, c)
    before = getattr(launch, name, None)
    refused(fake_gpu, ContractError, "BT0600", setattr, launch, name, ops.matadd if name == "kernel" else None)
    refused(fake_gpu, ContractError, "BT0600", delattr, launch, name)
    assert getattr(launch, name, None) is before
    launch(a, b, c)
    assert fake_gpu.launches[-1].symbol == fake_gpu.launches[0].symbol


@pytest.fixture
def launch_without_native(monkeypatch):
    """``runtime/launch.py`` as an install without buildtile's compiled module has it (its
    prepared launches are called in Python), loaded beside the real one."""
    import importlib.util

    from buildtile.runtime import launch, native

    monkeypatch.setattr(native, "compiled", None)
    spec = importlib.util.spec_from_file_location("buildtile_launch_without_native", launch.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.PreparedLaunch.__mro__[1] is object
    return module


def test_without_the_compiled_module_the_same_calls_are_refused(ops, fake_gpu, launch_without_native):
    a, b, c = vec(fake_gpu)
    launch = launch_without_native.prepare_launch(ops.vecadd, 4)
    launch(a, b, c)
    assert len(fake_gpu.launches) == 1
    assert "by position" in refused(fake_gpu, TypeMismatchError, "BT0308", launch, a, b, c=c)
    assert "64 bits" in refused(fake_gpu, TypeMismatchError, "BT0308", launch, a, b, c, stream=2**70)
    refused(fake_gpu, ContractError, "BT0600", setattr, launch, "kernel", ops.matadd)
    refused(fake_gpu, ContractError, "BT0600", launch_without_native.PreparedLaunch, ops.vecadd, (4, 1, 1),
            (256, 1, 1), 0)
    misaligned = FakeCudaArray(b.ptr + 2, b.shape, b.typestr)
    assert "not aligned" in refused(fake_gpu, TypeMismatchError, "BT0308", launch, a, misaligned, c)
    launch(a, b, c, stream=5)
    assert len(fake_gpu.launches) == 2 and fake_gpu.launches[-1].stream == 5
