"""The only module that calls the CUDA driver (through ``cuda.bindings.driver``).

Everything above this layer — argument checks, contracts, image choice —
is plain Python, and tests replace the one :class:`CudaDriver` instance
(:func:`set_driver`) with a fake, so they run without a GPU or libcuda.

Contexts: a launch runs in the *primary context* of the arguments' device,
the context the CUDA runtime, PyTorch and CuPy use, so buildtile shares
their memory and streams. The primary context is retained once per device
for the life of the process. A launch makes it current only for the
duration of the call when another context is current (and restores it),
so it never changes which device a framework thinks is current; when no
context is current at all it adopts the primary context, as the runtime
API would.

Every ``CUresult`` is checked; failures raise :class:`CudaError` with the
driver's own name and text for the error.
"""

from __future__ import annotations

import ctypes
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

from buildtile.errors import BuildtileError, CudaError, TypeMismatchError
from buildtile.interop.abi import TENSOR_MAP_BYTES
from buildtile.runtime.native import compiled as _native

#: the result of :meth:`CudaDriver.pointer_memory`
DEVICE_MEMORY, HOST_MEMORY, UNKNOWN_MEMORY = "device", "host", "unknown"

#: cuMemHostAlloc flag: map the allocation into the device's address space
CU_MEMHOSTALLOC_DEVICEMAP = 0x02
#: CUresult of a symbol a module does not have
CUDA_ERROR_NOT_FOUND = 500


@dataclass(eq=False)
class DeviceContext:
    """A device's retained primary context and what the runtime needs to know of the device."""

    device: int
    handle: object                  # CUcontext
    handle_int: int                 # its address, for cheap comparisons
    capability: tuple[int, int]
    name: str
    #: per-context helpers, created on first use
    event: object = field(default=None, repr=False)

    @property
    def arch(self) -> str:
        return f"sm_{self.capability[0]}{self.capability[1]}"

    def describe(self) -> str:
        return f"device {self.device} ({self.name}, {self.arch})"


class CudaDriver:
    """A thin, checked facade over the driver API calls buildtile uses."""

    #: encodes the tensor maps of TMA entries (:meth:`encode_tensor_map`)
    tensor_maps = True

    def __init__(self) -> None:
        self._cu = None
        self._lock = threading.RLock()
        self._contexts: dict[int, DeviceContext] = {}
        self._init_error: CudaError | None = None
        #: ``_native.launch`` when the compiled launch call is there and has the driver's entry points
        self._native_launch = None

    # ------------------------------------------------------------------ setup

    @property
    def cu(self):
        """The ``cuda.bindings.driver`` module, with ``cuInit`` done (raises CudaError if impossible)."""
        cu = self._cu
        if cu is None:
            cu = self._initialize()
        return cu

    def _initialize(self):
        with self._lock:
            if self._cu is not None:
                return self._cu
            if self._init_error is not None:
                raise self._init_error
            try:
                from cuda.bindings import driver as cu
            except ImportError as exc:
                self._init_error = CudaError(
                    f"no CUDA driver bindings: cannot import cuda.bindings.driver ({exc})",
                    help="install the `cuda-bindings` package (a dependency of buildtile)",
                )
                raise self._init_error from None
            try:
                (err,) = cu.cuInit(0)
            except Exception as exc:  # libcuda.so could not be loaded at all
                self._init_error = CudaError(
                    f"no CUDA driver found: {exc}",
                    help="install the NVIDIA driver; buildtile needs libcuda to launch kernels",
                )
                raise self._init_error from None
            if err != cu.CUresult.CUDA_SUCCESS:
                self._init_error = self._error(cu, err, "cuInit")
                raise self._init_error
            self._native_launch = _native_launcher(cu)
            self._cu = cu
            return cu

    @staticmethod
    def _error(cu, err, what: str) -> CudaError:
        name = text = None
        try:
            e1, name = cu.cuGetErrorName(err)
            e2, text = cu.cuGetErrorString(err)
            name = name.decode() if e1 == 0 and name else None
            text = text.decode() if e2 == 0 and text else None
        except Exception:
            pass
        code = int(err)
        label = name or f"CUresult {code}"
        message = f"CUDA driver call {what} failed: {label}" + (f": {text}" if text else "")
        help = None
        if label == "CUDA_ERROR_NO_DEVICE":
            message = f"no CUDA GPU found: {text or label}"
            help = "run on a machine with an NVIDIA GPU (check `nvidia-smi`)"
        elif label in ("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_INVALID_PTX"):
            help = "the NVIDIA driver is older than the PTX; update the driver or rebuild with a cubin for this GPU"
        error = CudaError(message, help=help)
        error.result = code
        error.result_name = label
        return error

    def check(self, result: tuple, what: str):
        """Raise CudaError unless ``result[0]`` is CUDA_SUCCESS; return the rest of the tuple."""
        err = result[0]
        if err != 0:
            raise self._error(self.cu, err, what)
        if len(result) == 1:
            return None
        return result[1] if len(result) == 2 else result[1:]

    # ------------------------------------------------------------------ devices

    def device_count(self) -> int:
        return int(self.check(self.cu.cuDeviceGetCount(), "cuDeviceGetCount"))

    def driver_version(self) -> tuple[int, int]:
        version = int(self.check(self.cu.cuDriverGetVersion(), "cuDriverGetVersion"))
        return version // 1000, (version % 1000) // 10

    def context(self, device: int) -> DeviceContext:
        """The retained primary context of ``device`` (retained once, kept for the process)."""
        ctx = self._contexts.get(device)
        if ctx is not None:
            return ctx
        with self._lock:
            ctx = self._contexts.get(device)
            if ctx is not None:
                return ctx
            cu = self.cu
            count = self.device_count()
            if not 0 <= device < count:
                raise CudaError(f"CUDA device {device} does not exist: this machine has {count} CUDA device(s)")
            name, (major, minor) = self.device_properties(device)
            dev = self.check(cu.cuDeviceGet(device), "cuDeviceGet")
            handle = self.check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
            ctx = DeviceContext(device, handle, int(handle), (major, minor), name)
            self._contexts[device] = ctx
            return ctx

    def contexts(self) -> list[DeviceContext]:
        """The primary contexts retained so far (the devices buildtile has worked on)."""
        return list(self._contexts.values())

    def device_properties(self, device: int) -> tuple[str, tuple[int, int]]:
        """``(name, (major, minor))`` of ``device``, without creating its context."""
        cu = self.cu
        dev = self.check(cu.cuDeviceGet(device), "cuDeviceGet")
        attr = cu.CUdevice_attribute
        major = self.check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                           "cuDeviceGetAttribute")
        minor = self.check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
                           "cuDeviceGetAttribute")
        raw_name = self.check(cu.cuDeviceGetName(256, dev), "cuDeviceGetName")
        return raw_name.split(b"\0", 1)[0].decode(errors="replace"), (int(major), int(minor))

    def multiprocessor_count(self, device: int) -> int:
        """The SMs of ``device`` (a persistent Tile launch runs one wave of blocks over them)."""
        cu = self.cu
        dev = self.check(cu.cuDeviceGet(device), "cuDeviceGet")
        count = self.check(cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                                   dev), "cuDeviceGetAttribute")
        return int(count)

    def context_device(self, context) -> int:
        """The device of ``context`` (any context, not only the primary ones buildtile retained)."""
        handle = int(context)
        for ctx in self.contexts():
            if ctx.handle_int == handle:
                return ctx.device
        cu = self.cu
        self.check(cu.cuCtxPushCurrent(context), "cuCtxPushCurrent")
        try:
            return int(self.check(cu.cuCtxGetDevice(), "cuCtxGetDevice"))
        finally:
            cu.cuCtxPopCurrent()

    def current_device(self) -> int:
        """The device of the calling thread's current context, or 0 when none is current."""
        cu = self.cu
        current = self.check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if int(current) == 0:
            return 0
        return int(self.check(cu.cuCtxGetDevice(), "cuCtxGetDevice"))

    @contextmanager
    def entered(self, ctx: DeviceContext):
        """Make ``ctx`` current for the block, restoring whatever was current before."""
        cu = self.cu
        current = self.check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if int(current) == ctx.handle_int:
            yield
            return
        self.check(cu.cuCtxPushCurrent(ctx.handle), "cuCtxPushCurrent")
        try:
            yield
        finally:
            self.check(cu.cuCtxPopCurrent(), "cuCtxPopCurrent")

    # ------------------------------------------------------------------ pointers

    def pointer_memory(self, ptr: int) -> tuple[str, int | None]:
        """Where ``ptr`` points: ``("device", ordinal)``, ``("host", None)`` or ``("unknown", None)``.

        Managed memory counts as device memory (of the device it was
        allocated for); pinned host memory counts as host memory.

        The device is that of the context the memory was allocated in, when
        the driver names one: ``CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL`` has
        been seen to say 0 for memory of device 1 (driver 580, two H200s),
        which would launch a kernel on the wrong device. Memory with no
        allocating context (virtual memory management, pools) keeps the
        ordinal the driver gives.
        """
        cu = self.cu
        attrs = [
            cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_IS_MANAGED,
            cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_CONTEXT,
        ]
        err, values = cu.cuPointerGetAttributes(len(attrs), attrs, ptr)
        if err != 0:
            return UNKNOWN_MEMORY, None
        memory_type, ordinal, managed = (int(v) for v in values[:3])
        if managed or memory_type in (int(cu.CUmemorytype.CU_MEMORYTYPE_DEVICE),
                                      int(cu.CUmemorytype.CU_MEMORYTYPE_UNIFIED)):
            context = values[3]
            if context is not None and int(context):
                ordinal = self.context_device(context)
            return DEVICE_MEMORY, ordinal
        if memory_type == int(cu.CUmemorytype.CU_MEMORYTYPE_HOST) or memory_type == 0:
            return HOST_MEMORY, None
        return UNKNOWN_MEMORY, None

    # ------------------------------------------------------------------ modules

    def load_module(self, ctx: DeviceContext, image: bytes, what: str):
        """Load a cubin or PTX image (PTX is JIT-compiled by the driver) into ``ctx``."""
        with self.entered(ctx):
            return self.check(self.cu.cuModuleLoadData(image), f"cuModuleLoadData ({what})")

    def get_function(self, module, symbol: str) -> int:
        """The ``CUfunction`` of ``symbol``, as its address (what every call below takes, and
        the cheapest thing to hand to a launch)."""
        return int(self.check(self.cu.cuModuleGetFunction(module, symbol.encode()), f"cuModuleGetFunction({symbol})"))

    def module_global(self, module, name: str) -> tuple[int, int] | None:
        """``(device address, size in bytes)`` of the global ``name`` of ``module``; None when
        the module has no such global."""
        result = self.cu.cuModuleGetGlobal(module, name.encode())
        if result[0] == CUDA_ERROR_NOT_FOUND:
            return None
        address, size = self.check(result, f"cuModuleGetGlobal({name})")
        return int(address), int(size)

    def encode_tensor_map(self, request) -> bytes:
        """The 128-byte ``CUtensorMap`` of a 2-D tiled map (a runtime.tensor_maps.TensorMapRequest),
        from ``cuTensorMapEncodeTiled``: element strides 1, no interleave, zeros out of bounds."""
        cu = self.cu
        u64, u32 = cu.cuuint64_t, cu.cuuint32_t   # the bindings take arrays of these, not ints
        encoded = self.check(cu.cuTensorMapEncodeTiled(
            cu.CUtensorMapDataType(request.data_type), len(request.dims), request.address,
            [u64(n) for n in request.dims], [u64(n) for n in request.strides], [u32(n) for n in request.box],
            [u32(1)] * len(request.dims),
            cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, cu.CUtensorMapSwizzle(request.swizzle),
            cu.CUtensorMapL2promotion(request.l2_promotion),
            cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")
        return ctypes.string_at(int(encoded.getPtr()), TENSOR_MAP_BYTES)

    def set_dynamic_shared(self, function, nbytes: int) -> None:
        """Allow ``nbytes`` of dynamic shared memory (needed above 48 KiB)."""
        cu = self.cu
        self.check(cu.cuFuncSetAttribute(
            function, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes,
        ), "cuFuncSetAttribute")

    def occupancy(self, ctx: DeviceContext, function, threads: int, shared: int) -> int:
        """Blocks of ``function`` (``threads`` each, ``shared`` dynamic shared bytes) that one
        multiprocessor runs at once."""
        cu = self.cu
        with self.entered(ctx):
            return int(self.check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(function, threads, shared),
                                  "cuOccupancyMaxActiveBlocksPerMultiprocessor"))

    # ------------------------------------------------------------------ launch

    def launch(self, ctx: DeviceContext, function, config: tuple, stream: int, packed: bytes,
               offsets: tuple[int, ...]) -> None:
        """``cuLaunchKernel`` in ``ctx``.

        ``function`` comes from :meth:`get_function`; ``config`` is ``(grid x, y, z,
        block x, y, z, dynamic shared bytes)``; the kernel parameters are packed in
        ``packed``, parameter k at byte ``offsets[k]``. ``packed`` is immutable and
        every call builds its own pointer array, so threads may share a launch.
        """
        native = self._native_launch
        if native is not None:
            err = native(ctx.handle_int, function, config, stream, packed, offsets)
            if err:
                self.raise_launch_failure(ctx, err, stream)
            return
        self._launch_through_bindings(ctx, function, config, stream, packed, offsets)

    def launch_cooperative(self, ctx: DeviceContext, function, config: tuple, stream: int, packed: bytes,
                           offsets: tuple[int, ...]) -> None:
        """:meth:`launch` through ``cuLaunchCooperativeKernel``: every block resident at once,
        with the grid workspace ``simt.grid_sync()`` counts its arrivals in."""
        self._launch_through_bindings(ctx, function, config, stream, packed, offsets, cooperative=True)

    def native_target(self, ctx: DeviceContext, function) -> tuple[int, int] | None:
        """``(context address, function address)`` for a prepared launch that calls the compiled
        launch itself (see ``_native.c``), or None when this driver's launches do not go there."""
        return (ctx.handle_int, int(function)) if self._native_launch is not None else None

    def _launch_through_bindings(self, ctx: DeviceContext, function, config: tuple, stream: int,
                                 packed: bytes, offsets: tuple[int, ...], cooperative: bool = False) -> None:
        """:meth:`launch` without the compiled launch call (an install without a C compiler)."""
        cu = self.cu
        buffer = ctypes.create_string_buffer(packed, max(len(packed), 1))
        base = ctypes.addressof(buffer)
        pointers = (ctypes.c_void_p * max(len(offsets), 1))(*(base + offset for offset in offsets))
        params = ctypes.addressof(pointers) if offsets else 0
        err, current = cu.cuCtxGetCurrent()
        pushed = False
        if current != ctx.handle:  # CUcontext objects compare by address
            if err != 0:
                raise self._error(cu, err, "cuCtxGetCurrent")
            if int(current) == 0:  # nothing current: adopt the primary context, as the runtime API does
                err, = cu.cuCtxSetCurrent(ctx.handle)
            else:                  # someone else's context: borrow the thread for this launch only
                err, = cu.cuCtxPushCurrent(ctx.handle)
                pushed = True
            if err != 0:
                raise self._error(cu, err, "making the device's primary context current")
        try:
            if cooperative:
                err, = cu.cuLaunchCooperativeKernel(function, *config, stream, params)
            else:
                err, = cu.cuLaunchKernel(function, *config, stream, params, 0)
        finally:
            if pushed:
                cu.cuCtxPopCurrent()
        if err != 0:
            raise self._launch_error(cu, err, ctx, stream,
                                     "cuLaunchCooperativeKernel" if cooperative else "cuLaunchKernel")

    def raise_launch_failure(self, ctx: DeviceContext, err: int, stream: int) -> None:
        """Raise the CudaError for what the compiled launch call returned in ``ctx`` (see
        ``_native.c``: a CUresult, negated when making the context current failed)."""
        cu = self.cu
        if err < 0:
            raise self._error(cu, _as_result(cu, -err), "making the device's primary context current")
        raise self._launch_error(cu, _as_result(cu, err), ctx, stream)

    def _launch_error(self, cu, err, ctx: DeviceContext, stream: int, call: str = "cuLaunchKernel") -> Exception:
        error = self._error(cu, err, call)
        if stream not in (0, 1, 2) and getattr(error, "result_name", "") in (
            "CUDA_ERROR_INVALID_HANDLE", "CUDA_ERROR_INVALID_CONTEXT", "CUDA_ERROR_INVALID_VALUE",
        ):
            # the usual cause: a stream created on another device
            try:
                e, stream_ctx = cu.cuStreamGetCtx(stream)
                if e == 0 and int(stream_ctx) != ctx.handle_int:
                    return TypeMismatchError(
                        f"mismatched types: the stream {stream:#x} belongs to another device or context "
                        f"than the arguments, which are on {ctx.describe()}",
                        help="launch on a stream of the arguments' device",
                    )
            except Exception:
                pass
        return error

    def stream_wait(self, ctx: DeviceContext, consumer: int, producer: int) -> None:
        """Make ``consumer`` wait for the work queued so far on ``producer`` (no host blocking)."""
        cu = self.cu
        with self._lock, self.entered(ctx):
            if ctx.event is None:
                ctx.event = self.check(
                    cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
            self.check(cu.cuEventRecord(ctx.event, producer), "cuEventRecord")
            self.check(cu.cuStreamWaitEvent(consumer, ctx.event, 0), "cuStreamWaitEvent")

    def stream_synchronize(self, ctx: DeviceContext, stream: int) -> None:
        with self.entered(ctx):
            self.check(self.cu.cuStreamSynchronize(stream), "cuStreamSynchronize")

    def synchronize(self, ctx: DeviceContext) -> None:
        with self.entered(ctx):
            self.check(self.cu.cuCtxSynchronize(), "cuCtxSynchronize")

    # ------------------------------------------------------------------ memory

    def mem_alloc(self, ctx: DeviceContext, nbytes: int) -> int:
        with self.entered(ctx):
            return int(self.check(self.cu.cuMemAlloc(max(nbytes, 1)), f"cuMemAlloc({nbytes} bytes)"))

    def host_alloc_mapped(self, ctx: DeviceContext, nbytes: int) -> tuple[int, int]:
        """Zeroed, pinned host memory that kernels in ``ctx`` can reach:
        ``(host address, device address)``. Kept for the life of the process."""
        cu = self.cu
        with self.entered(ctx):
            host = int(self.check(cu.cuMemHostAlloc(nbytes, CU_MEMHOSTALLOC_DEVICEMAP),
                                  f"cuMemHostAlloc({nbytes} bytes)"))
            ctypes.memset(host, 0, nbytes)
            device = int(self.check(cu.cuMemHostGetDevicePointer(host, 0), "cuMemHostGetDevicePointer"))
        return host, device

    def mem_free(self, ctx: DeviceContext, ptr: int) -> None:
        with self.entered(ctx):
            self.check(self.cu.cuMemFree(ptr), "cuMemFree")

    def memcpy_htod(self, ctx: DeviceContext, dst: int, src_address: int, nbytes: int) -> None:
        if nbytes:
            with self.entered(ctx):
                self.check(self.cu.cuMemcpyHtoD(dst, src_address, nbytes), "cuMemcpyHtoD")

    def memcpy_dtoh(self, ctx: DeviceContext, dst_address: int, src: int, nbytes: int) -> None:
        if nbytes:
            with self.entered(ctx):
                self.check(self.cu.cuMemcpyDtoH(dst_address, src, nbytes), "cuMemcpyDtoH")

    def memcpy_dtod(self, ctx: DeviceContext, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            with self.entered(ctx):
                self.check(self.cu.cuMemcpyDtoD(dst, src, nbytes), "cuMemcpyDtoD")

    def memset_d8(self, ctx: DeviceContext, dst: int, value: int, nbytes: int) -> None:
        if nbytes:
            with self.entered(ctx):
                self.check(self.cu.cuMemsetD8(dst, value, nbytes), "cuMemsetD8")


#: the driver entry points ``_native.launch`` calls, and the CUDA version whose ABI it expects
_NATIVE_ENTRY_POINTS = ("cuCtxGetCurrent", "cuCtxSetCurrent", "cuCtxPushCurrent", "cuCtxPopCurrent", "cuLaunchKernel")
_NATIVE_CUDA_VERSION = 12000


def _native_launcher(cu):
    """``_native.launch`` with the driver's entry points installed, or None when the compiled
    module is missing (an install without a C compiler) or the driver does not give them."""
    if _native is None:
        return None
    addresses = []
    for name in _NATIVE_ENTRY_POINTS:
        try:
            result = cu.cuGetProcAddress(name.encode(), _NATIVE_CUDA_VERSION,
                                         cu.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT)
        except Exception:  # bindings without cuGetProcAddress: stay on the bindings
            return None
        if result[0] != 0 or not result[1]:
            return None
        addresses.append(int(result[1]))
    _native.install(*addresses)
    return _native.launch


def _as_result(cu, code: int):
    """``code`` as a ``CUresult`` member, for the bindings' error lookups (the int when unknown)."""
    try:
        return cu.CUresult(code)
    except ValueError:
        return code


#: the process-wide driver facade; None until :func:`get_driver` or :func:`set_driver` installs one
#: (the launch path reads it directly, to spare a call)
current: CudaDriver | None = None
_driver_lock = threading.Lock()


def get_driver() -> CudaDriver:
    """The process-wide driver facade (created on first use; nothing is loaded until a call)."""
    driver = current
    if driver is None:
        with _driver_lock:
            driver = current
            if driver is None:
                driver = _set(_device_driver())
    return driver


def emulating() -> bool:
    """Whether ``BUILDTILE_DEVICE=cpu`` sends every launch to the CPU emulator."""
    return os.environ.get("BUILDTILE_DEVICE", "cuda") == "cpu"


def _device_driver():
    """The CUDA driver, or with ``BUILDTILE_DEVICE=cpu`` the CPU emulator of the full buildtile
    (the one place a launch is sent to the CPU instead of a GPU)."""
    device = os.environ.get("BUILDTILE_DEVICE", "cuda")
    if device == "cuda":
        return CudaDriver()
    if device != "cpu":
        raise BuildtileError(f"BUILDTILE_DEVICE must be `cuda` or `cpu`, not `{device}`", code="BT0805")
    try:
        from buildtile.emulate.driver import EmulatedDriver
    except ImportError as exc:
        raise BuildtileError(
            "BUILDTILE_DEVICE=cpu runs kernels on the CPU emulator, which comes with the full buildtile "
            f"(not the runtime alone): {exc}", code="BT0805", help="pip install buildtile") from None
    return EmulatedDriver()


def set_driver(driver) -> CudaDriver | None:
    """Replace the driver facade (tests install a fake); returns the previous one."""
    with _driver_lock:
        previous = current
        _set(driver)
        return previous


def _set(driver):
    global current
    current = driver
    if _native is not None:  # prepared launches armed with the old driver's handles go its way no more
        _native.forget_armed()
    return driver
