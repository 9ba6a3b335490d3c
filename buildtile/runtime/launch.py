"""A launch configuration bound to a kernel: validated once, then called many times.

:class:`PreparedLaunch` owns the packed argument buffer of its kernel
(one ``struct.pack_into`` per call) and the ``void*`` array pointing into
it, built once. A call is: resolve the stream, bind and check the
arguments with the binder generated for their types (no driver involved;
``env`` keeps DLPack capsules alive until the launch is queued), find the
device, fetch the kernel's function for that device (cached; the last
device is a field compare), pack, and ``cuLaunchKernel``. Everything that
can be refused is refused before the launch is queued.

The binder is kept per prepared launch: a call whose argument types differ
from the last call's gets None from it and switches to the binder for the
new types (see :meth:`~buildtile.runtime.signature.KernelSignature.binder_for`).
Kernels of a ``checks = "debug"`` build launch through
:class:`CheckedPreparedLaunch`, which first reports an out-of-range read
that an earlier launch recorded (see :mod:`buildtile.runtime.bounds`).
"""

from __future__ import annotations

import ctypes
import struct
import threading

from buildtile.interop.abi import launch_extras
from buildtile.runtime import bounds
from buildtile.runtime import driver as _driver_module
from buildtile.runtime.driver import get_driver
from buildtile.runtime.streams import stream_handle


class PreparedLaunch:
    """``kernel.prepare(grid=...)``: call it with the kernel's arguments to launch."""

    __slots__ = (
        "kernel", "grid", "block", "shared_mem", "unsafe",
        "_signature", "_bind", "_pack", "_packed", "_buffer", "_pointers", "_params_address", "_config",
        "_lock",
    )

    def __init__(self, kernel, grid: tuple[int, int, int], block: tuple[int, int, int],
                 shared_mem: int, unsafe: bool = False) -> None:
        self.kernel = kernel
        self.grid = grid
        self.block = block
        self.shared_mem = shared_mem
        self.unsafe = unsafe
        signature = kernel.signature
        self._signature = signature
        self._bind = signature.hot_binder
        layout = signature.layout
        self._pack = layout.struct.pack_into
        self._packed: tuple | None = None  # the values in the buffer now
        # a coarsened kernel runs several logical blocks per launched block and takes the
        # logical grid.x as a trailing parameter (ABI v1, interop.abi.launch_extras)
        launched_x, extras = launch_extras(kernel.record.get("contract") or {}, grid[0])
        self._config = (launched_x, grid[1], grid[2], *block, shared_mem)
        extras_at = (layout.size + 7) & ~7
        self._buffer = ctypes.create_string_buffer(extras_at + 8 * len(extras))
        base = ctypes.addressof(self._buffer)
        addresses = [base + off for off in layout.offsets]
        for k, value in enumerate(extras):
            struct.pack_into("<q", self._buffer, extras_at + 8 * k, value)
            addresses.append(base + extras_at + 8 * k)
        count = len(addresses)
        self._pointers = (ctypes.c_void_p * max(count, 1))(*addresses)
        self._params_address = ctypes.addressof(self._pointers) if count else 0
        # the driver reads the buffer during cuLaunchKernel, which may run without the GIL
        self._lock = threading.Lock()

    def __call__(self, *args, stream=None) -> None:
        """Check ``args`` and queue the kernel on ``stream`` (see :mod:`buildtile.runtime.streams`)."""
        handle = stream if type(stream) is int and stream >= 0 else stream_handle(stream, args)
        bound = self._bind(args, handle)
        if bound is None:  # other argument types than the last call's
            self._bind = self._signature.binder_for(args)
            bound = self._bind(args, handle)
        values, device, env, waits = bound
        driver = _driver_module._driver or get_driver()
        if device is None:
            device = self._signature.settle_device(env, driver.pointer_memory)
            if device is None:  # no array arguments: the calling thread's device
                device = driver.current_device()
        kernel = self.kernel
        hot_device, function = kernel._hot
        if device != hot_device:
            function = kernel._function_for(device)
        if self.shared_mem > function.shared_limit:
            kernel.allow_shared_memory(function, self.shared_mem)
        if waits:
            for producer in waits:
                driver.stream_wait(function.context, handle, producer)
        with self._lock:
            if values is not self._packed:  # a binder hands back the same tuple for the same values
                self._pack(self._buffer, 0, *values)
                self._packed = values
            driver.launch(function.context, function.handle, self._config, handle, self._params_address)

    def __repr__(self) -> str:
        kind = "unsafe launch" if self.unsafe else "launch"
        return (f"<prepared {kind} of {self.kernel.__name__}: grid={self.grid} block={self.block}"
                f"{f' shared_mem={self.shared_mem}' if self.shared_mem else ''}>")


class CheckedPreparedLaunch(PreparedLaunch):
    """The prepared launch of a kernel from a ``checks = "debug"`` build.

    Before anything is queued it raises :class:`~buildtile.errors.BoundsError`
    for an out-of-range read that an earlier launch recorded and nobody has
    reported yet (the records are host memory: reading them does not wait
    for the GPU). Release builds never get this class, so their launches
    pay nothing for it.
    """

    __slots__ = ()

    def __call__(self, *args, stream=None) -> None:
        bounds.raise_pending()
        PreparedLaunch.__call__(self, *args, stream=stream)
