"""The launch call of the real driver layer, without a GPU: both ways it can go.

``CudaDriver.launch`` calls the driver through buildtile's compiled launch
call (``runtime/_native.c``) when it is installed, else through
cuda.bindings. Each way must do the same: adopt the primary context when
none is current, borrow the thread (push, launch, pop) when another one
is, point ``kernelParams[k]`` at byte ``offsets[k]`` of the packed
parameters, and turn a failure into a CudaError with the driver's name
for it. Here the driver's entry points are Python functions: ctypes
callbacks for the compiled call, a stand-in ``cuda.bindings.driver``
module for the other way.
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass, field

import pytest

from buildtile.errors import CudaError
from buildtile.runtime.native import compiled as _native
from buildtile.runtime.driver import CudaDriver, DeviceContext

OURS, OTHERS = 0x1000, 0x2000
CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, CUDA_ERROR_INVALID_CONTEXT = 1, 701, 201


@dataclass
class DriverState:
    """What the stand-in driver entry points see and do."""

    current: int = 0
    launch_result: int = 0
    context_result: int = 0
    calls: list = field(default_factory=list)
    launches: list = field(default_factory=list)  # (function, config, stream, [parameter bytes])

    def launch(self, function, config, stream, params, count: int) -> int:
        """Record a launch with ``count`` parameters, each read as 8 bytes."""
        self.calls.append("launch")
        values = [ctypes.string_at(params[k], 8) for k in range(count)] if params else []
        self.launches.append((function, tuple(config), stream, values))
        return self.launch_result


CTX_GET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
CTX_SET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p,
                          ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)


@pytest.fixture
def native_state():
    """The compiled launch call with ctypes callbacks for entry points (the real ones restored after)."""
    state = DriverState()

    def get_current(out):
        state.calls.append("get")
        out[0] = state.current or None
        return state.context_result

    def set_current(ctx):
        state.calls.append(f"set {ctx:#x}")
        state.current = ctx
        return state.context_result

    def push_current(ctx):
        state.calls.append(f"push {ctx:#x}")
        state.pushed, state.current = state.current, ctx
        return state.context_result

    def pop_current(out):
        state.calls.append("pop")
        state.current = state.pushed
        return 0

    def launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        return state.launch(function, (gx, gy, gz, bx, by, bz, shared), stream or 0, params, state.expected)

    callbacks = [CTX_GET(get_current), CTX_SET(set_current), CTX_SET(push_current), CTX_GET(pop_current),
                 LAUNCH(launch)]
    state.expected = 0
    if _native is None:  # the bindings way only
        yield state
        return
    previous = _native.installed()
    _native.install(*(ctypes.cast(c, ctypes.c_void_p).value for c in callbacks))
    try:
        yield state
    finally:
        if previous is not None:
            _native.install(*previous)
        _native.forget_armed()  # nothing armed may call the callbacks, freed after this


class BindingsStandIn:
    """The part of ``cuda.bindings.driver`` the launch uses, over a :class:`DriverState`."""

    def __init__(self, state: DriverState) -> None:
        from cuda.bindings import driver as cu

        self.state = state
        self.CUresult = cu.CUresult

    def cuCtxGetCurrent(self):
        self.state.calls.append("get")
        return self.state.context_result, _Context(self.state.current)

    def cuCtxSetCurrent(self, ctx):
        self.state.calls.append(f"set {int(ctx):#x}")
        self.state.current = int(ctx)
        return (self.state.context_result,)

    def cuCtxPushCurrent(self, ctx):
        self.state.calls.append(f"push {int(ctx):#x}")
        self.state.pushed, self.state.current = self.state.current, int(ctx)
        return (self.state.context_result,)

    def cuCtxPopCurrent(self):
        self.state.calls.append("pop")
        self.state.current = self.state.pushed
        return 0, None

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        pointers = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p)) if params else None
        return (self.state.launch(function, (gx, gy, gz, bx, by, bz, shared), stream, pointers, self.state.expected),)

    def cuGetErrorName(self, err):
        return 0, self.CUresult(err).name.encode()

    def cuGetErrorString(self, err):
        return 0, b"what the driver says"

    def cuStreamGetCtx(self, stream):
        return 0, _Context(OTHERS)


class _Context(int):
    """A CUcontext stand-in: compares with another by address, as cuda.bindings' does."""


@pytest.fixture(params=["compiled", "bindings"])
def driver(request, native_state):
    """A CudaDriver whose launch goes the way named by the parameter, over ``native_state``."""
    driver = CudaDriver()
    driver._cu = BindingsStandIn(native_state)
    if request.param == "compiled" and _native is None:
        pytest.skip("buildtile's compiled launch call is not built")
    driver._native_launch = _native.launch if request.param == "compiled" else None
    driver.state = native_state
    return driver


CONTEXT = DeviceContext(0, _Context(OURS), OURS, (9, 0), "stand-in")
CONFIG = (3, 2, 1, 128, 2, 1, 4096)


def launch(driver, values=(0x7F00_0000_1000, 1000, 2.5), stream: int = 0x55):
    """Launch with an ABI-like parameter list: a pointer, an i64, an f32 (padded to 8 bytes, as each
    parameter is read back as 8 bytes)."""
    packed = struct.pack("<qqf4x", *values)
    driver.state.expected = 3
    driver.launch(CONTEXT, 0xF00D, CONFIG, stream, packed, (0, 8, 16))
    return driver.state.launches[-1]


def test_the_compiled_launch_call_is_built():
    # an install with a C compiler (as the test command's) must have built it
    assert _native is not None, "buildtile.runtime._native was not built"
    assert _native.launch.__doc__.startswith("launch(context, function, config, stream, packed, offsets)")


def test_parameters_config_function_and_stream_reach_the_driver(driver):
    function, config, stream, params = launch(driver)
    assert (function, config, stream) == (0xF00D, CONFIG, 0x55)
    assert struct.unpack("<q", params[0])[0] == 0x7F00_0000_1000
    assert struct.unpack("<q", params[1])[0] == 1000
    assert struct.unpack("<f", params[2][:4])[0] == 2.5


def test_no_current_context_adopts_the_primary_one(driver):
    launch(driver)
    assert driver.state.calls == ["get", f"set {OURS:#x}", "launch"]
    assert driver.state.current == OURS


def test_the_primary_context_current_already_is_launched_in(driver):
    driver.state.current = OURS
    launch(driver)
    assert driver.state.calls == ["get", "launch"]


def test_another_context_is_pushed_over_for_the_launch_and_restored(driver):
    driver.state.current = OTHERS
    launch(driver)
    assert driver.state.calls == ["get", f"push {OURS:#x}", "launch", "pop"]
    assert driver.state.current == OTHERS


def test_a_kernel_without_parameters_gets_no_parameter_array(driver):
    driver.state.expected = 0
    driver.launch(CONTEXT, 0xF00D, CONFIG, 0, b"", ())
    assert driver.state.launches[-1][3] == []


def test_a_refused_launch_is_a_cuda_error_named_by_the_driver(driver):
    driver.state.launch_result = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    driver.state.current = OTHERS
    with pytest.raises(CudaError) as info:
        launch(driver)
    assert "cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" in str(info.value)
    assert driver.state.current == OTHERS  # popped all the same


def test_a_stream_of_another_context_is_named_as_such(driver):
    driver.state.launch_result = CUDA_ERROR_INVALID_CONTEXT
    with pytest.raises(Exception) as info:
        launch(driver, stream=0x777)
    assert info.value.code == "BT0308" and "the stream 0x777 belongs to another device" in str(info.value)


def test_a_context_that_cannot_be_made_current_is_a_cuda_error(driver):
    driver.state.context_result = CUDA_ERROR_INVALID_VALUE
    with pytest.raises(CudaError) as info:
        launch(driver)
    assert "CUDA_ERROR_INVALID_VALUE" in str(info.value)
    assert "launch" not in driver.state.calls


@pytest.mark.parametrize("bad_call, words", [
    (lambda: _native.launch(OURS, 1, (1, 1, 1), 0, b"", ()), "config must be a tuple of 7 ints"),
    (lambda: _native.launch(OURS, 1, (2**32, 1, 1, 1, 1, 1, 0), 0, b"", ()), "does not fit 32 bits"),
    (lambda: _native.launch(OURS, 1, CONFIG, 0, b"\0" * 8, (8,)), "outside the packed bytes"),
    (lambda: _native.launch(OURS, 1, CONFIG, 0, bytearray(8), (0,)), "packed must be bytes"),
    (lambda: _native.launch(OURS, 1, CONFIG, 0, b""), "takes 6 arguments"),
])
def test_the_compiled_call_refuses_malformed_input_before_the_driver(native_state, bad_call, words):
    if _native is None:
        pytest.skip("buildtile's compiled launch call is not built")
    with pytest.raises((TypeError, ValueError, OverflowError), match=words):
        bad_call()
    assert native_state.calls == []
