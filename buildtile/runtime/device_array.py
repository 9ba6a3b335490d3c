"""A minimal GPU array, for hosts that have neither PyTorch nor CuPy.

:class:`DeviceArray` owns one ``cuMemAlloc`` allocation in a device's
primary context (so PyTorch, CuPy and buildtile kernels all see it), is
C-contiguous, and exposes ``__cuda_array_interface__`` (version 3) so any
consumer can read it. Copies to and from NumPy are synchronous.

NumPy has no bfloat16, so a ``bf16`` array crosses to and from NumPy as
``float32`` values: rounded to nearest (ties to even) on the way in, exact on
the way out. Its elements are two opaque bytes to NumPy (``|V2``, the
typestr the runtime reads as bf16).
"""

from __future__ import annotations

import math
import operator

import numpy as np

from buildtile.errors import BuildtileError
from buildtile.runtime import bounds
from buildtile.runtime.arrays import (
    DEVICE,
    ArrayView,
    InlineReader,
    register_extractor,
    register_inline_reader,
)
from buildtile.runtime.driver import get_driver
from buildtile.runtime.dtypes import bf16_bits, bf16_values, from_typestr, numpy_fields
from buildtile.runtime.streams import stream_handle

#: ABI dtype names accepted wherever a NumPy dtype is
_NUMPY_DTYPES = {
    "bool": np.bool_, "i8": np.int8, "i16": np.int16, "u8": np.uint8, "u16": np.uint16, "i32": np.int32, "i64": np.int64, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "f32": np.float32, "f64": np.float64,
    "complex64": np.complex64, "complex128": np.complex128,
}


#: how a bf16 element is stored: two bytes NumPy does not interpret
_BF16 = np.dtype("V2")


def _numpy_dtype(dtype) -> np.dtype:
    if isinstance(dtype, type) and getattr(dtype, "__buildtile_record__", False):   # a @simt.record class
        from buildtile.runtime.record_arrays import record_dtype

        return record_dtype(dtype)
    if isinstance(dtype, str) and dtype == "bf16":
        return _BF16
    try:
        return np.dtype(_NUMPY_DTYPES.get(dtype, dtype) if isinstance(dtype, str) else dtype)
    except TypeError as exc:
        raise BuildtileError(f"DeviceArray: {dtype!r} is not a dtype ({exc})") from None


def _shape(shape) -> tuple[int, ...]:
    try:
        dims = (operator.index(shape),)
    except TypeError:
        try:
            dims = tuple(operator.index(n) for n in shape)
        except TypeError:
            raise BuildtileError(f"DeviceArray: shape must be an int or a tuple of ints, got {shape!r}") from None
    if any(n < 0 for n in dims):
        raise BuildtileError(f"DeviceArray: shape must not be negative, got {dims}")
    return dims


class DeviceArray:
    """A C-contiguous array in GPU memory, owned by this object."""

    def __init__(self, shape, dtype="f32", device: int = 0) -> None:
        """Allocate an uninitialised array (same as :meth:`empty`). ``dtype`` is an ABI name
        (``"f32"``), a NumPy dtype (a structured one holds records) or a ``@simt.record`` class."""
        self.shape: tuple[int, ...] = _shape(shape)
        self.dtype: np.dtype = _numpy_dtype(dtype)
        self.device = operator.index(device)
        self.size = math.prod(self.shape)
        self.nbytes = self.size * self.dtype.itemsize
        self.ptr = 0
        # what a launch reads, computed once: ABI dtype, strides in elements, a structure's fields
        self._abi_dtype = from_typestr(self.dtype.str)
        self._element_strides = tuple(s // self.dtype.itemsize for s in self.strides)
        self._fields = numpy_fields(self.dtype)
        driver = get_driver()
        self._context = driver.context(self.device)
        # freed by the driver that allocated it, even when another one is in place by then
        self._driver = driver
        self.ptr = driver.mem_alloc(self._context, self.nbytes)

    # ------------------------------------------------------------------ constructors

    @classmethod
    def empty(cls, shape, dtype="f32", device: int = 0) -> DeviceArray:
        return cls(shape, dtype, device)

    @classmethod
    def zeros(cls, shape, dtype="f32", device: int = 0) -> DeviceArray:
        array = cls(shape, dtype, device)
        get_driver().memset_d8(array._context, array.ptr, 0, array.nbytes)
        return array

    @classmethod
    def from_numpy(cls, array, device: int = 0, *, dtype=None) -> DeviceArray:
        """A device copy of ``array`` (any NumPy array; it is made contiguous first), converted
        to ``dtype`` when one is given (``"bf16"``: rounded to nearest, ties to even)."""
        stored = np.asarray(array).dtype if dtype is None else _numpy_dtype(dtype)
        host = _host_data(array, stored)
        result = cls(host.shape, stored, device)
        get_driver().memcpy_htod(result._context, result.ptr, host.ctypes.data, result.nbytes)
        return result

    # ------------------------------------------------------------------ copies

    def to_numpy(self, stream=None) -> np.ndarray:
        """A host copy. Work on the legacy default stream is finished first; pass ``stream``
        to also wait for a launch queued on another stream. Like any synchronisation, it
        raises :class:`~buildtile.errors.BoundsError` for an out-of-range read that a
        debug build recorded meanwhile."""
        driver = get_driver()
        if stream is not None:
            driver.stream_synchronize(self._context, stream_handle(stream))
        bf16 = self.dtype == _BF16
        host = np.empty(self.shape, np.uint16 if bf16 else self.dtype)
        driver.memcpy_dtoh(self._context, host.ctypes.data, self.ptr, self.nbytes)
        bounds.raise_pending()
        return bf16_values(host) if bf16 else host

    def copy_from_numpy(self, array) -> None:
        host = _host_data(array, self.dtype)
        if host.shape != self.shape:
            raise BuildtileError(f"DeviceArray: cannot copy shape {host.shape} into shape {self.shape}")
        get_driver().memcpy_htod(self._context, self.ptr, host.ctypes.data, self.nbytes)

    def fill_bytes(self, value: int) -> None:
        """Set every byte to ``value`` (0..255), e.g. to poison an output before a test."""
        get_driver().memset_d8(self._context, self.ptr, value & 0xFF, self.nbytes)

    # ------------------------------------------------------------------ protocol

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def strides(self) -> tuple[int, ...]:
        """Byte strides, as NumPy reports them."""
        strides, step = [], self.dtype.itemsize
        for extent in reversed(self.shape):
            strides.append(step)
            step *= max(extent, 1)
        return tuple(reversed(strides))

    @property
    def __cuda_array_interface__(self) -> dict:
        return {
            "version": 3,
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.ptr, False),
            "strides": None,
            "stream": None,  # allocation and copies are synchronous: nothing to wait for
            # a structured dtype's fields (padding as unnamed entries), as NumPy's own interface has them
            **({"descr": self.dtype.descr} if self._fields is not None else {}),
        }

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self.shape[0]

    def __repr__(self) -> str:
        dtype = "bf16" if self.dtype == _BF16 else self.dtype
        return f"DeviceArray(shape={self.shape}, dtype={dtype}, device={self.device})"

    # ------------------------------------------------------------------ lifetime

    def free(self) -> None:
        """Release the memory now (also done when the object is collected)."""
        ptr, self.ptr = self.ptr, 0
        if ptr:
            self._driver.mem_free(self._context, ptr)

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:  # interpreter shutdown, or the context is already gone
            pass


def _host_data(array, dtype: np.dtype) -> np.ndarray:
    """``array`` as contiguous host memory holding ``dtype`` elements (bf16: their bit patterns)."""
    if dtype == _BF16:
        source = np.asarray(array)
        return np.ascontiguousarray(source if source.dtype == _BF16 else bf16_bits(source))
    return np.ascontiguousarray(array, dtype=dtype)


def _device_array_view(array: DeviceArray, stream: int) -> ArrayView:
    dtype, itemsize = array._abi_dtype
    return ArrayView(array, array.ptr, array.shape, array._element_strides, dtype, itemsize,
                     array.device, DEVICE, "DeviceArray", fields=array._fields)


class _DeviceArrayReader(InlineReader):
    """What generated binders inline for a DeviceArray: plain attribute reads."""

    def slice_code(self, k, dtype, namespace):
        return [f"if a{k}._abi_dtype[0] != {dtype!r} or len(a{k}.shape) != 1:",
                "    return SLOW(args, stream)",
                f"p{k} = a{k}.ptr",
                f"n{k} = a{k}.shape[0]",
                f"d{k} = a{k}.device"]

    def tensor_code(self, k, dtype, rank, namespace):
        return [f"if a{k}._abi_dtype[0] != {dtype!r} or len(a{k}.shape) != {rank}:",
                "    return SLOW(args, stream)",
                f"p{k} = a{k}.ptr",
                f"s{k} = a{k}.shape",
                f"t{k} = a{k}._element_strides",
                f"d{k} = a{k}.device"]


register_extractor(DeviceArray, _device_array_view)
register_inline_reader(DeviceArray, _DeviceArrayReader())
