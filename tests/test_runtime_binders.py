"""Binders specialised per argument types: the fast path must accept and refuse exactly what
the general path does, and skip nothing when the arguments change (on a fake GPU)."""

from __future__ import annotations

import struct

import pytest

from buildtile.errors import AliasingError, ContractError, TypeMismatchError
from buildtile.runtime import DeviceArray, arrays
from buildtile.runtime.arrays import TorchTensorReader


def refused(fake_gpu, exc_type, fn, *args, **kwargs) -> str:
    before = len(fake_gpu.queued)
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    assert len(fake_gpu.queued) == before
    return str(info.value)


def packed(kernel, fake_gpu) -> tuple:
    return kernel.signature.layout.struct.unpack(fake_gpu.launches[-1].params)


def sources(kernel) -> list[str]:
    return list(kernel.signature.binder_sources.values())


# ----------------------------------------------------------------------------- a PyTorch look-alike

class FakeDtype:
    def __init__(self, name: str, itemsize: int) -> None:
        self.name, self.itemsize = name, itemsize

    def __str__(self) -> str:
        return f"torch.{self.name}"


DTYPES = {"f32": FakeDtype("float32", 4), "f64": FakeDtype("float64", 8), "i32": FakeDtype("int32", 4)}


class FakeTensor:
    """The attributes buildtile reads from a PyTorch tensor, over fake device memory (properties
    and methods of the class, as torch.Tensor's are: the compiled reader calls them through the
    class)."""

    def __init__(self, ptr, shape, dtype="f32", strides=None, device=0):
        self.ptr, self._shape, self._dtype = ptr, tuple(shape), DTYPES[dtype]
        if strides is None:
            strides, step = [], 1
            for extent in reversed(self.shape):
                strides.insert(0, step)
                step *= max(extent, 1)
        self.strides, self.index = tuple(strides), device

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)
    is_cuda = property(lambda self: self.index >= 0)
    device = property(lambda self: f"cuda:{self.index}" if self.index >= 0 else "cpu")

    def data_ptr(self):
        return self.ptr

    def dim(self):
        return len(self.shape)

    def numel(self):
        n = 1
        for extent in self.shape:
            n *= extent
        return n

    def stride(self):
        return self.strides

    def get_device(self):
        return self.index

    def is_contiguous(self):
        expected = 1
        for extent, stride in zip(reversed(self.shape), reversed(self.strides)):
            if extent != 1 and stride != expected:
                return False
            expected *= extent
        return True


#: DLPack (type code, bits) of the fake dtypes
DLPACK_CODES = {"float32": (2, 32), "float64": (2, 64), "int32": (0, 32)}


def describe_for_dlpack(tensor: FakeTensor) -> tuple:
    """What a producer's exchange API says of ``tensor``: its pointer as data + byte_offset, no
    strides when it is compact (as PyTorch may), the CUDA device or the CPU."""
    offset = 16 if tensor.ptr >= 16 else 0
    cuda = tensor.index >= 0
    strides = None if tensor.is_contiguous() else tensor.strides
    return (tensor.ptr - offset, 2 if cuda else 1, tensor.index if cuda else 0, DLPACK_CODES[tensor.dtype.name],
            tensor.shape, strides, offset)


@pytest.fixture(params=["compiled", "python", "exchange"])
def tensors(request, fake_gpu, monkeypatch):
    """``make(shape, dtype="f32", **kw)``: FakeTensors read as PyTorch tensors are, fast path included:
    by buildtile's compiled reader, through the DLPack exchange API the type has (PyTorch 2.10 on),
    and by the binder's own Python (an install without a C compiler)."""
    api = None
    if request.param == "python":
        monkeypatch.setattr(arrays, "_native", None)
    elif request.param == "exchange":
        if arrays._native is None:
            pytest.skip("buildtile's compiled module is not built")
        from native_support import ExchangeAPI

        api = ExchangeAPI(describe_for_dlpack, lambda device: 0x5000 + device)
        monkeypatch.setattr(FakeTensor, "__dlpack_c_exchange_api__", api.capsule, raising=False)
    monkeypatch.setitem(arrays._EXTRACTORS, FakeTensor, arrays._torch_view)
    monkeypatch.setitem(arrays._INLINE_READERS, FakeTensor, TorchTensorReader(DTYPES.get))

    def make(shape, dtype="f32", **kwargs):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        count = 1
        for extent in shape:
            count *= extent
        return FakeTensor(fake_gpu.allocate(count * DTYPES[dtype].itemsize), shape, dtype, **kwargs)

    make.way = request.param
    make.exchange_api = api
    return make


# ----------------------------------------------------------------------------- the fast path

def test_tensors_launch_through_the_fast_binder(ops, fake_gpu, tensors):
    a, b, c = tensors(1000), tensors(1000), tensors(1000)
    ops.vecadd[4](a, b, c)
    assert packed(ops.vecadd, fake_gpu) == (a.ptr, 1000, b.ptr, 1000, c.ptr, 1000)
    assert any("fast, for" in text and "FakeTensor" in text for text in sources(ops.vecadd))
    reader = ops.vecadd[4]._bind.__globals__.get("READ")
    native = arrays._native
    if tensors.way == "exchange":
        assert reader is native.read_dlpack and tensors.exchange_api.calls == 3
    else:
        assert reader is (native.read_torch if native is not None else None)


def test_device_arrays_launch_through_the_fast_binder(ops, fake_gpu):
    a, b, c = (DeviceArray.zeros((3, 5)) for _ in range(3))
    ops.matadd[1, 1](a, b, c)
    assert packed(ops.matadd, fake_gpu) == (a.ptr, 3, 5, 5, 1, b.ptr, 3, 5, 5, 1, c.ptr, 3, 5, 5, 1)
    assert any("fast, for" in text for text in sources(ops.matadd))


def test_strided_tensors_pass_their_strides(ops, fake_gpu, tensors):
    a = tensors((5, 3))
    transposed = FakeTensor(a.ptr, (3, 5), strides=(1, 3))
    b, c = tensors((3, 5)), tensors((3, 5))
    ops.matadd[1, 1](transposed, b, c)
    assert packed(ops.matadd, fake_gpu)[:5] == (a.ptr, 3, 5, 1, 3)


def test_scalars_and_arrays_in_one_fast_call(ops, fake_gpu, tensors):
    x, y, out = tensors(8), tensors(8), tensors(8)
    ops.saxpy[1](2.5, x, y, out)
    assert packed(ops.saxpy, fake_gpu) == (2.5, x.ptr, 8, y.ptr, 8, out.ptr, 8)


def test_float_scalars_are_packed_on_every_launch(ops, fake_gpu, tensors):
    x, y, out = tensors(8), tensors(8), tensors(8)
    launch = ops.saxpy.prepare(grid=1)
    bits = []
    for alpha in (0.0, -0.0, 0.0):  # equal as numbers, not as bits
        launch(alpha, x, y, out)
        bits.append(fake_gpu.launches[-1].params[:4])
    assert bits == [struct.pack("<f", 0.0), struct.pack("<f", -0.0), struct.pack("<f", 0.0)]


# ----------------------------------------------------------------------------- refusals

@pytest.mark.parametrize("case, error, words", [
    ("dtype", TypeMismatchError, "parameter `b` of kernel `vecadd` expects Slice[f32], got float64 tensor"),
    ("rank", TypeMismatchError, "parameter `b` of kernel `vecadd` expects Slice[f32], got float32 tensor of shape (2, 5)"),
    ("strided", TypeMismatchError, "not contiguous: stride 2 elements"),
    ("host", TypeMismatchError, "float32 tensor of shape (10,) on cpu (the kernel reads GPU memory)"),
    ("alias", AliasingError, "cannot borrow `c` as mutable because it is also borrowed as immutable (as `a`)"),
    ("overlap", AliasingError, "`c` (bytes"),
    ("requires", ContractError, "requires `len(b) == len(c)` but len(b) = 9, len(c) = 10"),
    ("null", TypeMismatchError, "its data pointer is null"),
    ("devices", TypeMismatchError, "`a` is on cuda:0, `b` is on cuda:1"),
    ("misaligned", TypeMismatchError, "parameter `b` of kernel `vecadd` expects Slice[f32], got float32 tensor of "
                                      "shape (10,) (its first element at"),
    ("misaligned tensor", TypeMismatchError, "not aligned to 4 bytes"),
])
def test_fast_path_refusals_are_the_general_ones(ops, fake_gpu, tensors, case, error, words):
    fake_gpu.capabilities.append((9, 0))
    a, b, c = tensors(10), tensors(10), tensors(10)
    ops.vecadd[1](a, b, c)
    assert "fast binder" in ops.vecadd[1]._bind.__code__.co_filename  # in place for these types
    if case == "dtype":
        b = tensors(10, "f64")
    elif case == "rank":
        b = tensors((2, 5))
    elif case == "strided":
        b = FakeTensor(tensors(20).ptr, (10,), strides=(2,))
    elif case == "host":
        a = FakeTensor(0x1000, (10,), device=-1)
    elif case == "alias":
        c = a
    elif case == "overlap":
        c = FakeTensor(a.ptr + 16, (10,))
    elif case == "requires":
        b = tensors(9)
    elif case == "null":
        c = FakeTensor(0, (10,))
    elif case == "devices":
        b = FakeTensor(b.ptr, (10,), device=1)
    elif case == "misaligned":
        b = FakeTensor(b.ptr + 2, (10,))
    elif case == "misaligned tensor":
        m = tensors((3, 5))
        ops.matadd[1, 1](m, tensors((3, 5)), tensors((3, 5)))
        text = refused(fake_gpu, error, ops.matadd[1, 1], m, FakeTensor(tensors((3, 5)).ptr + 1, (3, 5)), tensors((3, 5)))
        assert words in text and "`b`" in text
        return
    text = refused(fake_gpu, error, ops.vecadd[1], a, b, c)
    assert words in text


def test_self_overlapping_output_is_refused(ops, fake_gpu, tensors):
    broadcast = FakeTensor(tensors(4).ptr, (3, 4), strides=(0, 1))
    text = refused(fake_gpu, TypeMismatchError, ops.matadd[1, 1], tensors((3, 4)), tensors((3, 4)), broadcast)
    assert "make different indices write the same element" in text


def test_freed_device_array_is_refused(ops, fake_gpu):
    a, b, c = (DeviceArray.zeros(10) for _ in range(3))
    ops.vecadd[1](a, b, c)
    c.free()
    assert "its data pointer is null" in refused(fake_gpu, TypeMismatchError, ops.vecadd[1], a, b, c)


def test_wrong_argument_count_on_the_fast_path(ops, fake_gpu, tensors):
    a, b, c = tensors(10), tensors(10), tensors(10)
    ops.vecadd[1](a, b, c)
    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[1], a, b)
    assert "takes 3 arguments" in text
    ops.vecadd[1](a, b, c)  # and the prepared launch still works


# ----------------------------------------------------------------------------- repeated and changed arguments

def test_repeated_arguments_are_packed_once_and_still_launched(ops, fake_gpu, tensors):
    a, b, c = tensors(10), tensors(10), tensors(10)
    launch = ops.vecadd.prepare(grid=1)
    for _ in range(3):
        launch(a, b, c)
    assert len(fake_gpu.launches) == 3
    assert {record.params for record in fake_gpu.launches} == {fake_gpu.launches[0].params}
    # the binder hands back the very values it checked last time (so nothing is packed again)
    assert launch._bind((a, b, c), 0)[0] is launch._bind((a, b, c), 0)[0]
    assert ("return seen[1]" in sources(ops.vecadd)[-1]) == (arrays._native is not None)


def test_changed_arguments_are_checked_again(ops, fake_gpu, tensors):
    a, b, c = tensors(10), tensors(10), tensors(10)
    launch = ops.vecadd.prepare(grid=1)
    launch(a, b, c)
    launch(b, a, c)  # other values, same checks passing
    assert packed(ops.vecadd, fake_gpu) == (b.ptr, 10, a.ptr, 10, c.ptr, 10)
    refused(fake_gpu, AliasingError, launch, a, c, c)
    launch(a, b, c)  # back to values that passed: packed again, not left as they were
    assert packed(ops.vecadd, fake_gpu) == (a.ptr, 10, b.ptr, 10, c.ptr, 10)


def test_another_prepared_launch_does_not_disturb_the_packed_values(ops, fake_gpu, tensors):
    first = ops.vecadd.prepare(grid=1)
    second = ops.vecadd.prepare(grid=2)
    x, y = [tensors(10) for _ in range(3)], [tensors(10) for _ in range(3)]
    first(*x)
    second(*y)
    first(*x)
    assert packed(ops.vecadd, fake_gpu) == (x[0].ptr, 10, x[1].ptr, 10, x[2].ptr, 10)


def test_switching_argument_types_switches_binders(ops, fake_gpu, tensors):
    launch = ops.vecadd.prepare(grid=1)
    fast = [tensors(10) for _ in range(3)]
    general = [fake_gpu.array(10) for _ in range(3)]
    device_arrays = [DeviceArray.zeros(10) for _ in range(3)]
    for args in (fast, general, device_arrays, fast, general):
        launch(*args)
        assert packed(ops.vecadd, fake_gpu)[::2] == tuple(arrays.array_view(x, 0).ptr for x in args)
    assert len(ops.vecadd.signature.binder_sources) == 3
    mixed = (fast[0], general[1], device_arrays[2])
    launch(*mixed)
    assert len(fake_gpu.launches) == 6


def test_general_binder_specialised_to_its_types_keeps_every_check(ops, fake_gpu):
    a, b, c = fake_gpu.array(10), fake_gpu.array(10), fake_gpu.array(10)
    ops.vecadd[1](a, b, c)
    (text,) = sources(ops.vecadd)
    assert "fast" not in text and "FakeCudaArray" in text
    refused(fake_gpu, AliasingError, ops.vecadd[1], a, b, b)
    refused(fake_gpu, ContractError, ops.vecadd[1], a, b, fake_gpu.array(9))


@pytest.mark.skipif(arrays._native is None, reason="buildtile's compiled module is not built")
def test_only_an_exchange_api_of_a_known_version_is_used():
    from native_support import ExchangeAPI

    for version, usable in [((1, 3), True), ((1, 4), True), ((1, 2), False), ((2, 0), False)]:
        api = ExchangeAPI(describe_for_dlpack, lambda device: 0, version)
        assert arrays._native.exchange_api_usable(api.capsule) == usable
    assert not arrays._native.exchange_api_usable(object())
    with pytest.raises(TypeError, match="not a usable DLPack exchange API"):
        arrays._native.read_dlpack((), FakeTensor, object(), (), None)


# ----------------------------------------------------------------------------- a CuPy look-alike

class FakeMemoryPointer:
    def __init__(self, ptr: int, device_id: int) -> None:
        self.ptr, self.device_id = ptr, device_id


class FakeCupyArray:
    """The fields buildtile reads from a cupy.ndarray, over fake device memory."""

    def __init__(self, ptr, shape, dtype="float32", byte_strides=None, device=0):
        import numpy

        self.dtype = numpy.dtype(dtype)
        self.shape = tuple(shape)
        if byte_strides is None:
            byte_strides, step = [], self.dtype.itemsize
            for extent in reversed(self.shape):
                byte_strides.insert(0, step)
                step *= max(extent, 1)
        self.strides = tuple(byte_strides)
        self.data = FakeMemoryPointer(ptr, device)
        expected, contiguous = self.dtype.itemsize, True
        for extent, stride in zip(reversed(self.shape), reversed(self.strides)):
            contiguous &= extent == 1 or stride == expected
            expected *= extent
        self._c_contiguous = contiguous


@pytest.fixture
def cupy_arrays(fake_gpu, monkeypatch):
    """``make(shape, dtype="float32", **kw)``: FakeCupyArrays, read as CuPy arrays are."""
    if arrays._native is None:
        pytest.skip("buildtile's compiled module is not built")
    monkeypatch.setitem(arrays._EXTRACTORS, FakeCupyArray, arrays._cupy_view)
    monkeypatch.setitem(arrays._INLINE_READERS, FakeCupyArray, arrays.CUPY_READER)

    def make(shape, dtype="float32", **kwargs):
        import numpy

        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        count = 1
        for extent in shape:
            count *= extent
        return FakeCupyArray(fake_gpu.allocate(count * numpy.dtype(dtype).itemsize), shape, dtype, **kwargs)

    return make


def test_cupy_arrays_are_read_from_c(ops, fake_gpu, cupy_arrays):
    a, b, c = cupy_arrays(1000), cupy_arrays(1000), cupy_arrays(1000)
    ops.vecadd[4](a, b, c)
    assert packed(ops.vecadd, fake_gpu) == (a.data.ptr, 1000, b.data.ptr, 1000, c.data.ptr, 1000)
    assert ops.vecadd[4]._bind.__globals__.get("READ") is arrays._native.read_cupy
    m = cupy_arrays((5, 3))
    transposed = FakeCupyArray(m.data.ptr, (3, 5), byte_strides=(4, 12))
    ops.matadd[1, 1](transposed, cupy_arrays((3, 5)), cupy_arrays((3, 5)))
    assert packed(ops.matadd, fake_gpu)[:5] == (m.data.ptr, 3, 5, 1, 3)


@pytest.mark.parametrize("case, error, words", [
    ("dtype", TypeMismatchError, "parameter `b` of kernel `vecadd` expects Slice[f32], got float64"),
    ("rank", TypeMismatchError, "parameter `b` of kernel `vecadd` expects Slice[f32]"),
    ("strided", TypeMismatchError, "not contiguous: stride 2 elements"),
    ("alias", AliasingError, "cannot borrow `c` as mutable because it is also borrowed as immutable (as `a`)"),
    ("requires", ContractError, "requires `len(b) == len(c)` but len(b) = 9, len(c) = 10"),
    ("devices", TypeMismatchError, "`a` is on cuda:0, `b` is on cuda:1"),
    ("misaligned", TypeMismatchError, "not aligned to 4 bytes"),
])
def test_cupy_refusals_are_the_general_ones(ops, fake_gpu, cupy_arrays, case, error, words):
    fake_gpu.capabilities.append((9, 0))
    a, b, c = cupy_arrays(10), cupy_arrays(10), cupy_arrays(10)
    ops.vecadd[1](a, b, c)
    if case == "dtype":
        b = cupy_arrays(10, "float64")
    elif case == "rank":
        b = cupy_arrays((2, 5))
    elif case == "strided":
        b = FakeCupyArray(cupy_arrays(20).data.ptr, (10,), byte_strides=(8,))
    elif case == "alias":
        c = a
    elif case == "requires":
        b = cupy_arrays(9)
    elif case == "devices":
        b = FakeCupyArray(b.data.ptr, (10,), device=1)
    elif case == "misaligned":
        b = FakeCupyArray(b.data.ptr + 2, (10,))
    text = refused(fake_gpu, error, ops.vecadd[1], a, b, c)
    assert words in text
    ops.vecadd[1](cupy_arrays(10), cupy_arrays(10), cupy_arrays(10))  # and it launches again
