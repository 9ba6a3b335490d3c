"""A launch configuration bound to a kernel: validated once, then called many times.

:class:`PreparedLaunch` owns the packed argument buffer of its kernel
(one ``struct.pack_into`` per call) and the ``void*`` array pointing into
it, built once. A call is: resolve the stream, bind and check the
arguments (no driver involved; ``env`` keeps DLPack capsules alive until the
launch is queued), find the device, fetch the kernel's function for that
device (cached; the last device is a field compare), pack, and
``cuLaunchKernel``. Everything that can be refused is refused before the
launch is queued.
"""

from __future__ import annotations

import ctypes
import threading

from buildtile.runtime import driver as _driver_module
from buildtile.runtime.driver import get_driver
from buildtile.runtime.streams import stream_handle


class PreparedLaunch:
    """``kernel.prepare(grid=...)``: call it with the kernel's arguments to launch."""

    __slots__ = (
        "kernel", "grid", "block", "shared_mem", "unsafe",
        "_bind", "_settle", "_pack", "_buffer", "_pointers", "_params_address", "_config", "_lock",
    )

    def __init__(self, kernel, grid: tuple[int, int, int], block: tuple[int, int, int],
                 shared_mem: int, unsafe: bool = False) -> None:
        self.kernel = kernel
        self.grid = grid
        self.block = block
        self.shared_mem = shared_mem
        self.unsafe = unsafe
        signature = kernel.signature
        self._bind = signature.bind_values
        self._settle = signature.settle_device
        layout = signature.layout
        self._pack = layout.struct.pack_into
        self._config = (*grid, *block, shared_mem)
        self._buffer = ctypes.create_string_buffer(layout.size)
        base = ctypes.addressof(self._buffer)
        count = len(layout.offsets)
        self._pointers = (ctypes.c_void_p * max(count, 1))(*(base + off for off in layout.offsets))
        self._params_address = ctypes.addressof(self._pointers) if count else 0
        # the driver reads the buffer during cuLaunchKernel, which may run without the GIL
        self._lock = threading.Lock()

    def __call__(self, *args, stream=None) -> None:
        """Check ``args`` and queue the kernel on ``stream`` (see :mod:`buildtile.runtime.streams`)."""
        handle = stream if type(stream) is int and stream >= 0 else stream_handle(stream, args)
        values, device, env, waits = self._bind(args, handle)
        driver = _driver_module._driver or get_driver()
        if device is None:
            device = self._settle(env, driver.pointer_memory)
            if device is None:  # no array arguments: the calling thread's device
                device = driver.current_device()
        kernel = self.kernel
        hot_device, function = kernel._hot
        if device != hot_device:
            function = kernel._function_for(device)
        if self._config[6] > function.shared_limit:
            kernel.allow_shared_memory(function, self._config[6])
        for producer in waits:
            driver.stream_wait(function.context, handle, producer)
        with self._lock:
            self._pack(self._buffer, 0, *values)
            driver.launch(function.context, function.handle, self._config, handle, self._params_address)

    def __repr__(self) -> str:
        kind = "unsafe launch" if self.unsafe else "launch"
        return (f"<prepared {kind} of {self.kernel.__name__}: grid={self.grid} block={self.block}"
                f"{f' shared_mem={self.shared_mem}' if self.shared_mem else ''}>")
