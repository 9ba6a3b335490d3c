"""A fake GPU whose launches are made by buildtile's compiled launch call.

:class:`CompiledLaunchFakeDriver` is the test suite's FakeDriver, except
that every launch goes through ``_native.launch`` to stand-in driver entry
points (ctypes callbacks), and that it gives prepared launches the
addresses they need to launch from C themselves (``native_target``). The
callbacks record the same LaunchRecords as FakeDriver, read back from the
parameter pointers the compiled call built, so a test asserts the same
things whichever way a launch went.
"""

from __future__ import annotations

import ctypes
import threading

from buildtile.errors import CudaError
from buildtile.runtime.native import compiled
from buildtile.runtime.testing import FakeDriver, LaunchRecord

#: the FakeDriver's context addresses are this plus the device number
CONTEXT_BASE = 0x1000
#: a CUresult the stand-in cuLaunchKernel returns for a launch the fake is told to fail
CUDA_ERROR_UNKNOWN = 999
#: function addresses handed out by the fake start here
FUNCTION_BASE = 0xF0000

_active: list = [None]   # the CompiledLaunchFakeDriver the entry points serve
_threads = threading.local()  # .stack: the calling thread's context stack, current last


def _stack() -> list:
    stack = getattr(_threads, "stack", None)
    if stack is None:
        stack = _threads.stack = [0]
    return stack


def _get_current(out):
    out[0] = _stack()[-1] or None
    return 0


def _set_current(ctx):
    _stack()[-1] = ctx or 0
    return 0


def _push_current(ctx):
    _stack().append(ctx or 0)
    return 0


def _pop_current(out):
    _stack().pop()
    return 0


def _launch_kernel(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    return _active[0].launched(function, (gx, gy, gz, bx, by, bz, shared), stream or 0, params)


_CTX_GET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
_CTX_SET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p,
                           ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)
#: kept for the whole session: the compiled module holds their addresses
_ENTRY_POINTS = (_CTX_GET(_get_current), _CTX_SET(_set_current), _CTX_SET(_push_current),
                 _CTX_GET(_pop_current), _LAUNCH(_launch_kernel))


class CompiledLaunchFakeDriver(FakeDriver):
    """FakeDriver, launching through the compiled launch call (see the module docstring)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._addresses: dict = {}   # FakeDriver function handle -> its address
        self._functions: dict = {}   # address -> FakeDriver function handle
        self._layouts: dict = {}     # address -> (packed size, offsets), as launch() was given them

    def install(self) -> None:
        """Make this fake the one the compiled launch call reaches."""
        _active[0] = self
        _stack()[:] = [0]
        compiled.install(*(ctypes.cast(entry, ctypes.c_void_p).value for entry in _ENTRY_POINTS))

    def _address(self, function) -> int:
        address = self._addresses.get(function)
        if address is None:
            address = self._addresses[function] = FUNCTION_BASE + 16 * len(self._addresses)
            self._functions[address] = function
        return address

    def native_target(self, ctx, function) -> tuple[int, int]:
        return ctx.handle_int, self._address(function)

    def launch(self, ctx, function, config, stream, packed, offsets) -> None:
        address = self._address(function)
        self._layouts[address] = (len(packed), tuple(offsets))
        err = compiled.launch(ctx.handle_int, address, config, stream, packed, offsets)
        if err:
            self.raise_launch_failure(ctx, err, stream)

    def raise_launch_failure(self, ctx, err: int, stream: int) -> None:
        raise self.fail_launch or CudaError(f"cuLaunchKernel failed: {err}")

    def launched(self, address: int, config: tuple, stream: int, params) -> int:
        """What the stand-in cuLaunchKernel does: record the launch as FakeDriver would."""
        if self.fail_launch is not None:
            return CUDA_ERROR_UNKNOWN
        size, offsets = self._layouts[address]
        if offsets:
            start = params[0]
            assert [params[k] - start for k in range(len(offsets))] == [offset - offsets[0] for offset in offsets]
            packed = ctypes.string_at(start - offsets[0], size)
        else:
            assert not params
            packed = b""
        symbol = self._functions[address][1]
        self._record("launch", symbol)
        self.launches.append(LaunchRecord(symbol, _stack()[-1] - CONTEXT_BASE, tuple(config[0:3]),
                                          tuple(config[3:6]), config[6], stream, packed, offsets))
        return 0


# ----------------------------------------------------------------------------- a DLPack exchange API

class DLTensor(ctypes.Structure):
    """dlpack.h's DLTensor (48 bytes), device and dtype flattened."""

    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_FROM_PY_OBJECT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(DLTensor))
_CURRENT_STREAM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))


class _ExchangeAPI(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("prev_api", ctypes.c_void_p),
                ("allocator", ctypes.c_void_p), ("from_py_object", ctypes.c_void_p), ("to_py_object", ctypes.c_void_p),
                ("dltensor_from_py_object", _FROM_PY_OBJECT), ("current_work_stream", _CURRENT_STREAM)]


_set_error = ctypes.pythonapi.PyErr_SetString
_set_error.argtypes = [ctypes.py_object, ctypes.c_char_p]
_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class ExchangeAPI:
    """A producer's ``__dlpack_c_exchange_api__`` made of Python functions.

    ``describe(obj)`` returns ``(data, device_type, device_id, (code, bits), shape, strides or
    None, byte_offset)`` or raises (the C call then fails with that error set);
    ``current_stream(device_id)`` is the producer's current stream of a CUDA device.
    ``calls`` counts the tensors described.
    """

    def __init__(self, describe, current_stream, version=(1, 3)) -> None:
        self.calls = 0
        self._kept: dict = {}  # id(obj) -> the shape and strides arrays last handed out for it

        def from_py_object(address, out):
            obj = ctypes.cast(address, ctypes.py_object).value
            self.calls += 1
            try:
                data, device_type, device_id, (code, bits), shape, strides, offset = describe(obj)
            except Exception as exc:
                _set_error(type(exc), str(exc).encode())
                return -1
            shape_array = (ctypes.c_int64 * max(len(shape), 1))(*shape)
            strides_array = None if strides is None else (ctypes.c_int64 * max(len(strides), 1))(*strides)
            self._kept[id(obj)] = (shape_array, strides_array)
            out[0] = DLTensor(data, device_type, device_id, len(shape), code, bits, 1,
                              ctypes.cast(shape_array, ctypes.POINTER(ctypes.c_int64)),
                              None if strides_array is None else ctypes.cast(strides_array, ctypes.POINTER(ctypes.c_int64)),
                              offset)
            return 0

        def work_stream(device_type, device_id, out):
            out[0] = current_stream(device_id)
            return 0

        self._table = _ExchangeAPI(version[0], version[1], None, 1, 1, 1,
                                   _FROM_PY_OBJECT(from_py_object), _CURRENT_STREAM(work_stream))
        self.capsule = _new_capsule(ctypes.addressof(self._table), b"dlpack_exchange_api", None)
