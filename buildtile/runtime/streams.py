"""Turning whatever the caller passed as ``stream=`` into a raw ``CUstream`` handle.

Accepted: ``None``; anything with ``__cuda_stream__`` (returns ``(version,
handle)``, the protocol cuda.core, PyTorch and CuPy implement); a
``torch.cuda.Stream`` (``.cuda_stream``); a CuPy stream (``.ptr``); a
cuda.bindings ``CUstream`` or ``cudaStream_t``; a raw integer handle (an
``int``, or any integer ``operator.index`` takes but a bool), from 0 to 2**64 - 1.

With ``stream=None`` the launch follows the framework of its arguments, as
their users expect: the current PyTorch stream of the first tensor's device
when a PyTorch tensor is passed, else CuPy's current stream when a CuPy
array is passed, else the legacy default stream (handle 0). Neither
framework is imported unless one of its objects is in hand.

:func:`synchronize` waits for a stream (or every device buildtile has
used) and then reports what a debug build recorded meanwhile.
"""

from __future__ import annotations

import operator
import sys

from buildtile.errors import TypeMismatchError
from buildtile.runtime.arrays import exchange_api

#: the legacy default stream
DEFAULT_STREAM = 0
#: the largest handle a ``CUstream`` (a 64-bit pointer) can hold
MAX_STREAM_HANDLE = 2**64 - 1

#: type -> "torch" / "cupy" / None; decided once per argument type
_FRAMEWORK_OF_TYPE: dict[type, str | None] = {}


def _framework(cls: type) -> str | None:
    root = (cls.__module__ or "").partition(".")[0]
    if root == "torch":
        torch = sys.modules.get("torch")
        if torch is not None and issubclass(cls, torch.Tensor):
            return "torch"
    elif root == "cupy":
        cupy = sys.modules.get("cupy")
        if cupy is not None and issubclass(cls, cupy.ndarray):
            return "cupy"
    return None


def default_stream(args) -> int:
    """The stream a launch uses when the caller names none (see the module docstring)."""
    cupy_array = None
    for arg in args:
        cls = type(arg)
        try:
            framework = _FRAMEWORK_OF_TYPE[cls]
        except KeyError:
            framework = _FRAMEWORK_OF_TYPE[cls] = _framework(cls)
        if framework == "torch" and arg.is_cuda:
            return _torch_current_stream(arg.get_device())
        if framework == "cupy" and cupy_array is None:
            cupy_array = arg
    if cupy_array is not None:
        return _cupy_current_stream(cupy_array)
    return DEFAULT_STREAM


def current_stream_source(args) -> object | None:
    """The DLPack exchange API (a capsule, see ``arrays.exchange_api``) whose current stream of
    a device is what :func:`default_stream` gives for arguments of the types of ``args`` all on
    that device: when they are PyTorch tensors of one type and plain Python numbers. Else None.

    A prepared launch armed with it asks PyTorch for the stream from C (``_native.c``)."""
    tensor_type = None
    for arg in args:
        cls = type(arg)
        if cls is int or cls is float or cls is bool or cls is tensor_type:
            continue
        if tensor_type is not None or _framework(cls) != "torch":
            return None
        tensor_type = cls
    return exchange_api(tensor_type) if tensor_type is not None else None


_torch_raw_stream = None  # PyTorch's current-stream accessor, found on first use


def _torch_current_stream(device: int) -> int:
    global _torch_raw_stream
    raw = _torch_raw_stream
    if raw is None:
        torch = sys.modules["torch"]
        # the cheap accessor compilers built on PyTorch use, where this PyTorch has it
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
            lambda device: torch.cuda.current_stream(device).cuda_stream)
        _torch_raw_stream = raw
    return int(raw(device))


def _cupy_current_stream(array) -> int:
    cupy = sys.modules["cupy"]
    device_id = array.data.device_id
    try:
        return int(cupy.cuda.get_current_stream(device_id).ptr)
    except TypeError:  # CuPy versions whose get_current_stream() takes no device
        with cupy.cuda.Device(device_id):
            return int(cupy.cuda.get_current_stream().ptr)


def stream_handle(stream: object, args=()) -> int:
    """The raw ``CUstream`` handle for ``stream`` (``None``: the default for ``args``)."""
    if stream is None:
        return default_stream(args)
    if type(stream) is int:
        return _checked_handle(stream, stream)
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        try:
            _version, handle = protocol() if callable(protocol) else protocol
        except Exception as exc:
            raise TypeMismatchError(f"mismatched types: `stream=` {stream!r}: __cuda_stream__ failed: {type(exc).__name__}: {exc}") from None
        return _checked_handle(handle, stream)
    root = (type(stream).__module__ or "").partition(".")[0]
    if root == "torch" and hasattr(stream, "cuda_stream"):
        return _checked_handle(stream.cuda_stream, stream)
    if root == "cupy" and hasattr(stream, "ptr"):
        return _checked_handle(stream.ptr, stream)
    if root == "cuda":  # cuda.bindings CUstream / cudaStream_t
        try:
            return _checked_handle(int(stream), stream)
        except (TypeError, ValueError):
            pass
    if not isinstance(stream, bool) and hasattr(type(stream), "__index__"):  # an int subclass, NumPy's integers
        return _checked_handle(stream, stream)
    raise TypeMismatchError(
        f"mismatched types: `stream=` does not accept {type(stream).__module__}.{type(stream).__qualname__}",
        help="pass an object with __cuda_stream__, a torch.cuda.Stream, a cupy.cuda.Stream, "
             "a cuda.bindings CUstream, or a raw integer handle",
    )


def _checked_handle(handle: object, stream: object) -> int:
    """``handle`` (what ``stream`` gave) as a ``CUstream`` value: an integer in [0, 2**64)."""
    if isinstance(handle, bool):
        handle = None
    try:
        value = operator.index(handle)
    except TypeError:
        raise TypeMismatchError(
            f"mismatched types: `stream=` {stream!r} gave the handle {handle!r}, which is not an integer") from None
    if value < 0:
        raise TypeMismatchError(f"mismatched types: a stream handle cannot be negative, got {value}")
    if value > MAX_STREAM_HANDLE:
        raise TypeMismatchError(
            f"mismatched types: a stream handle is a 64-bit pointer, got {value:#x}, which does not fit 64 bits")
    return value


def synchronize(stream: object = None) -> None:
    """Wait for the GPU, then report an out-of-range read that a debug build recorded.

    ``stream=None`` waits for all work on every device buildtile has used
    (as ``torch.cuda.synchronize()`` does for one device); otherwise for the
    work queued on ``stream`` (any form ``stream=`` accepts at a launch).
    Raises :class:`~buildtile.errors.BoundsError` when a kernel of a
    ``checks = "debug"`` build read out of range since the last report.
    """
    from buildtile.runtime import bounds
    from buildtile.runtime.driver import get_driver

    driver = get_driver()
    if stream is None:
        for ctx in driver.contexts():
            driver.synchronize(ctx)
    else:
        handle = stream_handle(stream)
        driver.stream_synchronize(driver.context(driver.current_device()), handle)
    bounds.raise_pending()
