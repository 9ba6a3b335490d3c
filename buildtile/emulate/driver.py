"""The driver facade of ``BUILDTILE_DEVICE=cpu``: one emulated GPU, in host memory.

:func:`buildtile.runtime.driver.get_driver` installs :class:`EmulatedDriver`
instead of the CUDA driver when ``BUILDTILE_DEVICE=cpu``; everything above the
driver -- argument binding and its checks (types, contract, ``requires``,
aliasing), grids, streams, ``DeviceArray`` -- is the runtime's own, unchanged.
"Device memory" is host memory, so NumPy arrays and CPU torch tensors are
accepted as device arrays (their extractors are registered here); a kernel
image is never loaded: :meth:`EmulatedDriver.get_function` lowers the kernel
again from its module's source (its PTX entry name says which module and
kernel) and :meth:`EmulatedDriver.launch` runs that IR on the CPU.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import struct
import sys
import threading
from pathlib import Path

from buildtile.backend import CompileOptions
from buildtile.backends.tile.backend import TMA_SUFFIX
from buildtile.backends.tile.hopper.select import HOPPER_TARGET
from buildtile.emulate.hostir import EmulationError
from buildtile.emulate.tensor_maps import encode as encode_tensor_map
from buildtile.emulate.machine import HostKernel
from buildtile.emulate.sources import host_kernel
from buildtile.runtime.arrays import DEVICE, ArrayView, register_extractor
from buildtile.interop.abi import TENSOR_MAP, TENSOR_MAP_BYTES
from buildtile.runtime.driver import DEVICE_MEMORY, DeviceContext

#: the compute capability the emulated GPU reports (images for it must exist in the package,
#: since the runtime chooses one before the emulator takes over); BUILDTILE_EMULATED_ARCH=sm_80 ...
DEFAULT_ARCH = "sm_90"


def demangle(symbol: str) -> tuple[str, str]:
    """``(module, kernel name)`` of a PTX entry name made by ``interop.abi.mangle`` (a tile
    specialization's suffix is ignored)."""
    parts, k = [], 1
    if not symbol.startswith("k"):
        raise EmulationError(f"`{symbol}` is not a buildtile kernel entry name", code="BT0805")
    while k < len(symbol) and symbol[k].isdigit():
        end = k
        while symbol[end].isdigit():
            end += 1
        n = int(symbol[k:end])
        parts.append(symbol[end:end + n])
        k = end + n
    if len(parts) < 2:
        raise EmulationError(f"`{symbol}` is not a buildtile kernel entry name", code="BT0805")
    return ".".join(parts[:-1]), parts[-1]


def _host_array_view(obj, stream: int) -> ArrayView:
    """A NumPy array as device memory of the emulated GPU (device 0)."""
    from buildtile.runtime.dtypes import from_typestr, numpy_fields

    dtype, itemsize = from_typestr(obj.dtype.str)
    strides = tuple(s // itemsize for s in obj.strides)
    problem = None if all(s % itemsize == 0 for s in obj.strides) else "byte strides that are not whole elements"
    return ArrayView(obj, obj.ctypes.data, tuple(obj.shape), strides, dtype, itemsize, 0, DEVICE,
                     "NumPy array", None, not obj.flags.writeable, problem, fields=numpy_fields(obj.dtype))


def _torch_cpu_view(t, stream: int) -> ArrayView:
    """A CPU torch tensor as device memory of the emulated GPU (device 0)."""
    from buildtile.runtime.dtypes import from_torch

    dtype, itemsize = from_torch(t.dtype)
    return ArrayView(t, t.data_ptr(), tuple(t.shape), tuple(t.stride()), dtype, itemsize, 0, DEVICE, "tensor")


#: the SMs the emulated device reports
EMULATED_MULTIPROCESSORS = 4


class EmulatedDriver:
    """The driver interface over the CPU emulator (see the module docstring)."""

    #: it encodes tensor maps (:meth:`encode_tensor_map`), so on an sm_90 device a specialization's
    #: TMA entry (wgmma, TMA, mbarriers) launches where the inputs suit TMA, as on a GPU
    tensor_maps = True

    def __init__(self) -> None:
        arch = os.environ.get("BUILDTILE_EMULATED_ARCH", DEFAULT_ARCH).removeprefix("sm_").rstrip("a")
        self.capability = (int(arch[:-1]), int(arch[-1]))
        self._ctx = DeviceContext(0, "cpu", 0x1, self.capability, "buildtile CPU emulator")
        self._buffers: dict[int, ctypes.Array] = {}
        self._lock = threading.Lock()
        import numpy as np

        register_extractor(np.ndarray, _host_array_view)
        torch = _torch()
        if torch is not None:
            register_extractor(torch.Tensor, _torch_cpu_view)

    # -- devices -------------------------------------------------------------
    def device_count(self) -> int:
        return 1

    def driver_version(self) -> tuple[int, int]:
        return (13, 0)

    def device_properties(self, device: int):
        return self._ctx.name, self.capability

    def context(self, device: int) -> DeviceContext:
        if device != 0:
            raise EmulationError(f"the CPU emulator has one device (0), not device {device}", code="BT0805")
        return self._ctx

    def contexts(self) -> list[DeviceContext]:
        return [self._ctx]

    def current_device(self) -> int:
        return 0

    def multiprocessor_count(self, device: int) -> int:
        """A few SMs, so a persistent Tile launch really loops over tiles here."""
        return EMULATED_MULTIPROCESSORS

    def pointer_memory(self, ptr: int):
        return DEVICE_MEMORY, 0

    # -- memory: host memory -------------------------------------------------
    def mem_alloc(self, ctx, nbytes: int) -> int:
        buffer = (ctypes.c_char * max(nbytes + 256, 256))()
        address = (ctypes.addressof(buffer) + 255) & ~255   # 256-byte aligned, like cuMemAlloc
        with self._lock:
            self._buffers[address] = buffer
        return address

    def mem_free(self, ctx, ptr: int) -> None:
        with self._lock:
            self._buffers.pop(ptr, None)

    def host_alloc_mapped(self, ctx, nbytes: int) -> tuple[int, int]:
        address = self.mem_alloc(ctx, nbytes)
        ctypes.memset(address, 0, nbytes)
        return address, address

    def memcpy_htod(self, ctx, dst: int, src_address: int, nbytes: int) -> None:
        ctypes.memmove(dst, src_address, nbytes)

    def memcpy_dtoh(self, ctx, dst_address: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst_address, src, nbytes)

    def memcpy_dtod(self, ctx, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def memset_d8(self, ctx, dst: int, value: int, nbytes: int) -> None:
        ctypes.memset(dst, value, nbytes)

    # -- modules and launches -----------------------------------------------
    def load_module(self, ctx, image: bytes, what: str):
        return ("emulated module", what)

    def get_function(self, module, symbol: str) -> HostKernel:
        """The entry ``symbol``, lowered from its module's source and compiled for the host."""
        module_name, _ = demangle(symbol)
        spec = importlib.util.find_spec(module_name)
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            raise EmulationError(
                f"the CPU emulator needs the source of module `{module_name}` to run kernel entry `{symbol}`",
                code="BT0805", help="install the package with its .py sources")
        from buildtile.runtime.package import package_runtime

        # a TMA entry exists only in a build for sm_90a (its suffix says so)
        targets = (HOPPER_TARGET,) if symbol.endswith(TMA_SUFFIX) else ()
        options = CompileOptions(checks="debug" if package_runtime(module_name).debug else "release",
                                 targets=targets)
        return host_kernel(Path(spec.origin), module_name, symbol, options)

    def encode_tensor_map(self, request) -> bytes:
        """The emulator's 128-byte map of ``request`` (a runtime.tensor_maps.TensorMapRequest)."""
        return encode_tensor_map(request)

    def module_global(self, module, name: str):
        return None   # no debug bounds records: the emulator checks every access itself

    def set_dynamic_shared(self, function, nbytes: int) -> None:
        pass

    def launch(self, ctx, function: HostKernel, config, stream, packed: bytes, offsets) -> None:
        """Run the launch now (streams are in order on one emulated device)."""
        function.launch(tuple(config[0:3]), tuple(config[3:6]), config[6], _unpacked(function, packed, offsets))

    def occupancy(self, ctx, function: HostKernel, threads: int, shared: int) -> int:
        return 1

    def launch_cooperative(self, ctx, function: HostKernel, config, stream, packed: bytes, offsets) -> None:
        """Run the launch now with every block resident, so ``simt.grid_sync`` can wait for all."""
        function.launch(tuple(config[0:3]), tuple(config[3:6]), config[6], _unpacked(function, packed, offsets),
                        cooperative=True)

    def native_target(self, ctx, function) -> None:
        return None

    def raise_launch_failure(self, ctx, err: int, stream: int) -> None:
        raise EmulationError(f"emulated launch failed ({err})", code="BT0805")

    def stream_wait(self, ctx, consumer: int, producer: int) -> None:
        pass

    def stream_synchronize(self, ctx, stream: int) -> None:
        pass

    def synchronize(self, ctx) -> None:
        pass


def _unpacked(function: HostKernel, packed: bytes, offsets) -> list:
    """The flat parameter values of a packed argument buffer (a tensor map: its bytes)."""
    return [bytes(packed[o:o + TENSOR_MAP_BYTES]) if t == TENSOR_MAP
            else _decode(int.from_bytes(packed[o:o + 8], "little"), t)
            for o, t in zip(offsets, function.host.param_types)]


def _decode(raw: int, llvm_type: str):
    """A flat parameter read back from the packed buffer (8 bytes read; keep the type's own)."""
    if llvm_type == "float":
        return struct.unpack("<f", (raw & 0xFFFFFFFF).to_bytes(4, "little"))[0]
    if llvm_type == "double":
        return struct.unpack("<d", raw.to_bytes(8, "little"))[0]
    bits = {"i1": 8, "i8": 8, "i16": 16, "half": 16, "bfloat": 16, "i32": 32}.get(llvm_type, 64)
    return raw & ((1 << bits) - 1)


def _torch():
    """torch, when the program has imported it (the emulator never imports it itself)."""
    return sys.modules.get("torch")
