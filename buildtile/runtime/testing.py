"""Stand-ins for the CUDA driver and for GPU arrays, to test host code without a GPU.

:class:`FakeDriver` implements the interface of
:class:`~buildtile.runtime.driver.CudaDriver` over host memory: allocations
are ``bytearray``\\ s at made-up device addresses, launches are recorded (with
their packed arguments) instead of run; host-mapped memory is real host
memory, at the same address on the "device". Install it with
:func:`buildtile.runtime.driver.set_driver` or the :func:`fake_driver`
context manager. :class:`FakeCudaArray` is an object exposing
``__cuda_array_interface__`` over such an allocation (views of it may
overlap, for aliasing tests) and :class:`FakeDLPackArray` exposes the DLPack
protocol with a real capsule, so the capsule reader is exercised as a real
producer would drive it.
"""

from __future__ import annotations

import ctypes
import math
import struct
from contextlib import contextmanager
from dataclasses import dataclass, field

from buildtile.interop.abi import DTYPES, TENSOR_MAP_BYTES
from buildtile.runtime.driver import (
    DEVICE_MEMORY,
    HOST_MEMORY,
    DeviceContext,
    set_driver,
)

#: where fake device allocations start (far from any host address the tests use)
_FAKE_BASE = 0x7F00_0000_0000


#: how :meth:`FakeDriver.encode_tensor_map` packs a request
_FAKE_MAP = struct.Struct("<IQQQQIIII")


def read_fake_tensor_map(data: bytes) -> dict:
    """The fields of a map :meth:`FakeDriver.encode_tensor_map` made."""
    data_type, address, d0, d1, stride, b0, b1, swizzle, l2 = _FAKE_MAP.unpack_from(data)
    return {"data_type": data_type, "address": address, "dims": (d0, d1), "strides": (stride,), "box": (b0, b1),
            "swizzle": swizzle, "l2_promotion": l2}


@dataclass
class LaunchRecord:
    """One launch the fake driver received, with its kernel parameters as packed bytes."""

    symbol: str
    device: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int
    stream: int
    params: bytes  # the packed argument buffer (ABI order, natural alignment)
    offsets: tuple[int, ...] = ()  # where each kernel parameter starts in ``params``
    cooperative: bool = False      # launched with cuLaunchCooperativeKernel

    def param(self, k: int, code: str):
        """Kernel parameter ``k``, read as the ``struct`` format ``code`` (e.g. ``"q"``)."""
        return struct.unpack_from("<" + code, self.params, self.offsets[k])[0]


@dataclass
class _Allocation:
    base: int
    data: bytearray
    device: int


@dataclass
class FakeDriver:
    """The driver interface over host memory; records what the runtime asks of it."""

    capabilities: list = field(default_factory=lambda: [(9, 0)])
    calls: list = field(default_factory=list)          # (method name, args) in call order
    launches: list = field(default_factory=list)       # LaunchRecord per launch
    loaded_images: list = field(default_factory=list)  # (device, image bytes)
    fail_launch: Exception | None = None               # raise this from launch()
    version: tuple[int, int] = (13, 0)                 # the CUDA release driver_version() reports
    multiprocessors: int = 132                         # of every device
    blocks_per_multiprocessor: int = 8                 # occupancy() of every function
    tensor_maps: bool = True                           # encodes tensor maps (TMA entries launch)
    encoded_maps: list = field(default_factory=list)   # the TensorMapRequest of each map encoded

    def __post_init__(self) -> None:
        self._contexts: dict[int, DeviceContext] = {}
        self._allocations: list[_Allocation] = []
        self._next = _FAKE_BASE
        self._host_buffers: list = []                    # host-mapped allocations, kept alive
        self._module_globals: dict = {}                  # (module, name) -> fake device address
        self._modules_of: dict = {}                      # (symbol, device) -> module

    # -- devices -------------------------------------------------------------
    def _record(self, name: str, *args) -> None:
        self.calls.append((name, args))

    def device_count(self) -> int:
        return len(self.capabilities)

    def driver_version(self) -> tuple[int, int]:
        return self.version

    def device_properties(self, device: int):
        return f"Fake GPU {device}", tuple(self.capabilities[device])

    def context(self, device: int) -> DeviceContext:
        self._record("context", device)
        ctx = self._contexts.get(device)
        if ctx is None:
            if not 0 <= device < len(self.capabilities):
                from buildtile.errors import CudaError

                raise CudaError(f"CUDA device {device} does not exist")
            ctx = DeviceContext(device, f"ctx{device}", 0x1000 + device, tuple(self.capabilities[device]),
                                f"Fake GPU {device}")
            self._contexts[device] = ctx
        return ctx

    def current_device(self) -> int:
        self._record("current_device")
        return 0

    def multiprocessor_count(self, device: int) -> int:
        self._record("multiprocessor_count", device)
        return self.multiprocessors

    def contexts(self) -> list:
        return list(self._contexts.values())

    # -- memory --------------------------------------------------------------
    def allocate(self, nbytes: int, device: int = 0) -> int:
        """Reserve ``nbytes`` of fake device memory (256-byte aligned, like cuMemAlloc)."""
        base = self._next
        self._next += max(256, -(-nbytes // 256) * 256) + 256  # a gap between allocations
        self._allocations.append(_Allocation(base, bytearray(nbytes), device))
        return base

    def _find(self, ptr: int, nbytes: int = 1) -> tuple[_Allocation, int]:
        for alloc in self._allocations:
            if alloc.base <= ptr and ptr + nbytes <= alloc.base + max(len(alloc.data), 1):
                return alloc, ptr - alloc.base
        raise ValueError(f"{ptr:#x} (+{nbytes} bytes) is not fake device memory")

    def read(self, ptr: int, nbytes: int) -> bytes:
        alloc, offset = self._find(ptr, nbytes)
        return bytes(alloc.data[offset:offset + nbytes])

    def write(self, ptr: int, data: bytes) -> None:
        alloc, offset = self._find(ptr, len(data))
        alloc.data[offset:offset + len(data)] = data

    def pointer_memory(self, ptr: int):
        self._record("pointer_memory", ptr)
        try:
            alloc, _ = self._find(ptr)
        except ValueError:
            return HOST_MEMORY, None
        return DEVICE_MEMORY, alloc.device

    def mem_alloc(self, ctx, nbytes: int) -> int:
        self._record("mem_alloc", ctx.device, nbytes)
        return self.allocate(nbytes, ctx.device)

    def mem_free(self, ctx, ptr: int) -> None:
        self._record("mem_free", ptr)
        self._allocations = [a for a in self._allocations if a.base != ptr]

    def memcpy_htod(self, ctx, dst: int, src_address: int, nbytes: int) -> None:
        self._record("memcpy_htod", dst, nbytes)
        if nbytes:
            self.write(dst, ctypes.string_at(src_address, nbytes))

    def memcpy_dtoh(self, ctx, dst_address: int, src: int, nbytes: int) -> None:
        self._record("memcpy_dtoh", src, nbytes)
        if nbytes:
            ctypes.memmove(dst_address, bytes(self.read(src, nbytes)), nbytes)

    def memcpy_dtod(self, ctx, dst: int, src: int, nbytes: int) -> None:
        self._record("memcpy_dtod", dst, src, nbytes)
        if nbytes:
            self.write(dst, self.read(src, nbytes))

    def memset_d8(self, ctx, dst: int, value: int, nbytes: int) -> None:
        self._record("memset_d8", dst, value, nbytes)
        if nbytes:
            self.write(dst, bytes([value]) * nbytes)

    def host_alloc_mapped(self, ctx, nbytes: int) -> tuple[int, int]:
        """Zeroed host memory; with unified addressing its device address is the same."""
        self._record("host_alloc_mapped", ctx.device, nbytes)
        buffer = ctypes.create_string_buffer(nbytes)
        self._host_buffers.append(buffer)
        address = ctypes.addressof(buffer)
        return address, address

    # -- modules and launches -----------------------------------------------
    def load_module(self, ctx, image: bytes, what: str):
        self._record("load_module", ctx.device, what)
        self.loaded_images.append((ctx.device, image))
        return ("module", ctx.device, len(self.loaded_images))

    def get_function(self, module, symbol: str):
        self._record("get_function", symbol)
        self._modules_of[(symbol, module[1])] = module
        return ("function", symbol, module)

    def module_global(self, module, name: str):
        """Every fake module has every global asked for: 8 zeroed bytes of fake device memory."""
        self._record("module_global", name)
        key = (module, name)
        if key not in self._module_globals:
            self._module_globals[key] = self.allocate(8, module[1])
        return self._module_globals[key], 8

    def set_dynamic_shared(self, function, nbytes: int) -> None:
        self._record("set_dynamic_shared", function[1], nbytes)

    def encode_tensor_map(self, request) -> bytes:
        """A stand-in map: the request's fields packed into 128 bytes (:func:`read_fake_tensor_map`
        reads them back), so a test can find in a launch's parameters which map it got."""
        self._record("encode_tensor_map", request)
        self.encoded_maps.append(request)
        return _FAKE_MAP.pack(request.data_type, request.address, *request.dims, *request.strides, *request.box,
                              request.swizzle, request.l2_promotion).ljust(TENSOR_MAP_BYTES, b"\0")

    def launch(self, ctx, function, config, stream, packed, offsets) -> None:
        self._record("launch", function[1])
        if self.fail_launch is not None:
            raise self.fail_launch
        self.launches.append(LaunchRecord(function[1], ctx.device, tuple(config[0:3]), tuple(config[3:6]),
                                          config[6], stream, bytes(packed), tuple(offsets)))

    def launch_cooperative(self, ctx, function, config, stream, packed, offsets) -> None:
        self._record("launch_cooperative", function[1])
        if self.fail_launch is not None:
            raise self.fail_launch
        self.launches.append(LaunchRecord(function[1], ctx.device, tuple(config[0:3]), tuple(config[3:6]),
                                          config[6], stream, bytes(packed), tuple(offsets), cooperative=True))

    def occupancy(self, ctx, function, threads: int, shared: int) -> int:
        self._record("occupancy", function[1], threads, shared)
        return self.blocks_per_multiprocessor

    def native_target(self, ctx, function) -> None:
        """Launches go through :meth:`launch`, never straight to the compiled launch call."""
        return None

    def stream_wait(self, ctx, consumer: int, producer: int) -> None:
        self._record("stream_wait", consumer, producer)

    def stream_synchronize(self, ctx, stream: int) -> None:
        self._record("stream_synchronize", stream)

    def synchronize(self, ctx) -> None:
        self._record("synchronize")

    # -- helpers for tests ----------------------------------------------------
    def report_out_of_range(self, symbol: str, site: int, index: int, extent: int, axis: int = 0,
                            device: int = 0, name: str = "__buildtile_bounds") -> bool:
        """Do what a debug build's kernel ``symbol`` does on an out-of-range read: if its module's
        bounds global holds a record address, claim the record (first report wins) and fill it.
        Returns whether a record was written."""
        module = self._modules_of.get((symbol, device))
        if module is None or (module, name) not in self._module_globals:
            return False
        record = int.from_bytes(self.read(self._module_globals[(module, name)], 8), "little")
        if not record:  # reporting is off
            return False
        flag = ctypes.c_uint32.from_address(record)
        if flag.value:
            return False
        fields = struct.pack("<Iqq", site, index, extent) + struct.pack("<I", axis)
        ctypes.memmove(record + 4, fields, len(fields))
        flag.value = 1
        return True

    def array(self, shape, dtype: str = "f32", device: int = 0, **kwargs) -> FakeCudaArray:
        """A fresh C-contiguous fake array of ABI ``dtype`` (zero-filled)."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        itemsize = DTYPES[dtype][0]
        ptr = self.allocate(math.prod(shape) * itemsize, device)
        return FakeCudaArray(ptr, shape, DTYPES[dtype][3], **kwargs)

    @property
    def queued(self) -> list:
        """Calls that queue work on the GPU or touch device memory (launches, copies, waits)."""
        return [c for c in self.calls if c[0] in ("launch", "stream_wait", "memcpy_htod", "memcpy_dtoh",
                                                   "memcpy_dtod", "memset_d8")]


class FakeCudaArray:
    """An object exposing ``__cuda_array_interface__`` (v3) for a made-up pointer."""

    def __init__(self, ptr: int, shape, typestr: str = "<f4", strides=None, readonly: bool = False,
                 stream: int | None = None, version: int = 3, descr: list | None = None) -> None:
        self.ptr = ptr
        self.shape = tuple(shape)
        self.typestr = typestr
        self.descr = descr   # a structured element's fields (typestr "|V<size>"), as NumPy's descr lists them
        self.strides = None if strides is None else tuple(strides)  # bytes
        self.readonly = readonly
        self.stream = stream
        self.version = version

    @property
    def itemsize(self) -> int:
        return int(self.typestr[2:])

    def view(self, offset_elements: int = 0, shape=None, strides=None) -> FakeCudaArray:
        """Another array over the same memory: ``offset`` in elements, ``strides`` in bytes."""
        return FakeCudaArray(self.ptr + offset_elements * self.itemsize,
                             self.shape if shape is None else tuple(shape), self.typestr,
                             strides, self.readonly, self.stream, self.version, self.descr)

    @property
    def __cuda_array_interface__(self) -> dict:
        cai = {
            "version": self.version,
            "shape": self.shape,
            "typestr": self.typestr,
            "data": (self.ptr, self.readonly),
            "strides": self.strides,
        }
        if self.version >= 3:
            cai["stream"] = self.stream
        if self.descr is not None:
            cai["descr"] = self.descr
        return cai


# ---------------------------------------------------------------------- DLPack producer

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR)(
    ("PyCapsule_New", ctypes.pythonapi))
_capsule_is_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_NAMES = {False: ctypes.create_string_buffer(b"dltensor"), True: ctypes.create_string_buffer(b"dltensor_versioned")}


#: the exports of FakeDLPackArrays whose capsules are alive: address of the managed tensor ->
#: (producer, its ctypes objects). Held here, not by the producer, so a capsule that outlives its
#: producer (kept by a traceback, say) still finds its deleter and its memory.
_EXPORTS: dict[int, tuple] = {}


def _release_export(address: int) -> None:
    """The deleter of every FakeDLPackArray export: counts the release on its producer."""
    export = _EXPORTS.pop(address, None)
    if export is not None:
        export[0].released += 1


def _destroy_capsule(capsule: int) -> None:
    for versioned in (True, False):
        name = _NAMES[versioned]
        if _capsule_is_valid_raw(capsule, name):
            address = _capsule_pointer_raw(capsule, name)
            managed = (_DLManagedTensorVersioned if versioned else _DLManagedTensor).from_address(address)
            managed.deleter(address)
            return
    # renamed to "used_dltensor": the consumer owns it and must call the deleter


# module-level callbacks: a ctypes callback must outlive every capsule that may call it
_DELETE_EXPORT = _DELETER(_release_export)
_CAPSULE_DESTROYED = _CAPSULE_DESTRUCTOR(_destroy_capsule)


class FakeDLPackArray:
    """A DLPack producer over a made-up pointer, counting how often its tensors are released.

    Each ``__dlpack__()`` builds a ``DLManagedTensor`` and a capsule whose
    destructor calls the deleter when the capsule was not consumed, exactly
    as the protocol asks of producers. ``released`` counts deleter calls.
    """

    def __init__(self, ptr: int, shape, dtype: tuple[int, int, int] = (2, 32, 1), device=(2, 0),
                 strides=None, versioned: bool = True, flags: int = 0, byte_offset: int = 0) -> None:
        self.ptr, self.shape, self.dtype, self.device = ptr, tuple(shape), dtype, device
        self.strides = None if strides is None else tuple(strides)  # elements
        self.versioned, self.flags, self.byte_offset = versioned, flags, byte_offset
        self.exported = 0
        self.released = 0
        self.last_stream: object = "unset"

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.last_stream = stream
        versioned = self.versioned and max_version is not None and max_version[0] >= 1
        ndim = len(self.shape)
        shape = (ctypes.c_int64 * max(ndim, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(ndim, 1))(*self.strides) if self.strides is not None else None
        tensor = _DLTensor(self.ptr, _DLDevice(*self.device), ndim, _DLDataType(*self.dtype),
                           ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                           ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)) if strides is not None else None,
                           self.byte_offset)
        if versioned:
            managed = _DLManagedTensorVersioned(1, 0, None, _DELETE_EXPORT, self.flags, tensor)
        else:
            managed = _DLManagedTensor(tensor, None, _DELETE_EXPORT)
        address = ctypes.addressof(managed)
        _EXPORTS[address] = (self, managed, shape, strides)
        self.exported += 1
        return _capsule_new(address, _NAMES[versioned], _CAPSULE_DESTROYED)


@contextmanager
def fake_driver(**kwargs):
    """Install a :class:`FakeDriver` for the duration of the block."""
    driver = FakeDriver(**kwargs)
    previous = set_driver(driver)
    try:
        yield driver
    finally:
        set_driver(previous)
