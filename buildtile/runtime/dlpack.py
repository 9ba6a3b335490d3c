"""Reading a DLPack capsule without taking ownership of it.

A producer's ``__dlpack__()`` returns a fresh ``PyCapsule`` named
``"dltensor"`` (or ``"dltensor_versioned"`` for DLPack >= 1.0) that wraps a
``DLManagedTensor``. A consumer that *takes* the tensor renames the capsule
to ``"used_dltensor"`` and becomes responsible for calling its deleter. We
only need to read the pointer, shape and strides for the duration of one
launch, while the caller still holds the producing object, so we do not
consume the capsule: we read the struct, keep the capsule alive until the
launch has been queued, and let the capsule's own destructor (set by the
producer, and run because the name is still the original one) call the
deleter. That is the ownership the DLPack protocol specifies for a capsule
that was never consumed.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

#: DLDeviceType values (dlpack.h)
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13

DEVICE_TYPE_NAMES = {
    1: "cpu",
    2: "cuda",
    3: "cuda pinned host memory",
    4: "opencl",
    7: "vulkan",
    8: "metal",
    9: "vpi",
    10: "rocm",
    11: "rocm host memory",
    12: "ext_dev",
    13: "cuda managed memory",
    14: "oneapi",
    15: "webgpu",
    16: "hexagon",
    17: "maia",
}

#: DLManagedTensorVersioned.flags bits
FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1

#: the newest DLPack version whose struct layout this module reads
MAX_VERSION = (1, 1)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", _DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


# private prototypes: setting argtypes on ctypes.pythonapi's shared function objects
# would change them for every other user in the process
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))

_VERSIONED = b"dltensor_versioned"
_UNVERSIONED = b"dltensor"


class DLPackError(ValueError):
    """The capsule is not one we can read (consumed already, unknown version ...)."""


@dataclass(frozen=True)
class DLPackTensor:
    """What one capsule says about its tensor; strides are in elements."""

    data: int
    device_type: int
    device_id: int
    dtype_code: int
    dtype_bits: int
    dtype_lanes: int
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # None: compact row-major
    read_only: bool
    is_copied: bool


def read_capsule(capsule: object) -> DLPackTensor:
    """Read a ``dltensor`` / ``dltensor_versioned`` capsule, leaving it unconsumed.

    The caller must keep ``capsule`` alive for as long as it uses the data
    pointer; dropping the capsule lets the producer release its reference.
    """
    if _capsule_is_valid(capsule, _VERSIONED):
        managed = _DLManagedTensorVersioned.from_address(_capsule_get_pointer(capsule, _VERSIONED))
        major, minor = managed.version.major, managed.version.minor
        if major != MAX_VERSION[0]:
            raise DLPackError(f"DLPack version {major}.{minor} is not supported (this buildtile reads 1.x)")
        flags = managed.flags
        read_only, is_copied = bool(flags & FLAG_READ_ONLY), bool(flags & FLAG_IS_COPIED)
    elif _capsule_is_valid(capsule, _UNVERSIONED):
        managed = _DLManagedTensor.from_address(_capsule_get_pointer(capsule, _UNVERSIONED))
        read_only = is_copied = False
    else:
        raise DLPackError("__dlpack__() did not return an unconsumed DLPack capsule")
    t = managed.dl_tensor
    ndim = t.ndim
    if ndim < 0:
        raise DLPackError(f"DLPack tensor has a negative ndim ({ndim})")
    shape = tuple(t.shape[k] for k in range(ndim)) if ndim else ()
    strides = tuple(t.strides[k] for k in range(ndim)) if (ndim and t.strides) else None
    return DLPackTensor(
        data=(t.data or 0) + t.byte_offset,
        device_type=t.device.device_type,
        device_id=t.device.device_id,
        dtype_code=t.dtype.code,
        dtype_bits=t.dtype.bits,
        dtype_lanes=t.dtype.lanes,
        shape=shape,
        strides=strides,
        read_only=read_only,
        is_copied=is_copied,
    )


def export_capsule(obj: object, stream: int | None) -> object:
    """Call ``obj.__dlpack__`` asking for the newest version we read, falling back for old producers.

    ``stream`` is the consumer stream in the protocol's encoding (``None``
    for host memory, ``1`` for the legacy default stream, else a handle);
    the producer makes the data ready on it before returning.
    """
    try:
        return obj.__dlpack__(stream=stream, max_version=MAX_VERSION)
    except TypeError:
        # producers older than DLPack 1.0 do not take max_version
        return obj.__dlpack__(stream=stream)
