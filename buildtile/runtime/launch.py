"""A launch configuration bound to a kernel: validated once, then called many times.

:class:`PreparedLaunch` packs the kernel's parameters into one immutable
``bytes`` per call (reused while the arguments repeat), so threads may
share a prepared launch without a lock. A call is: resolve the stream,
bind and check the arguments with the binder generated for their types
(no driver involved; ``env`` keeps DLPack capsules alive until the launch
is queued), find the device, fetch the kernel's function for that device
(cached; the last device is a field compare), pack, and ``cuLaunchKernel``
(in C when buildtile's compiled launch call is installed, see
``runtime/_native.c``). Everything that can be refused is refused before
the launch is queued.

With buildtile's compiled module (``runtime/_native.c``), a prepared
launch is a ``FastLaunch``: after the first launch on a device, calls
whose arguments bind the same way (same types, same device, no streams
to wait on) run that sequence without the interpreter, calling the
binder and the packing from C. Everything else takes :meth:`_launch`,
the Python way, which decides, raises, or arms the fast way again.

The binder is kept per prepared launch: a call whose argument types differ
from the last call's gets None from it and switches to the binder for the
new types (see :meth:`~buildtile.runtime.signature.KernelSignature.binder_for`).
Kernels of a ``checks = "debug"`` build launch through
:class:`CheckedPreparedLaunch`, which first reports an out-of-range read
that an earlier launch recorded (see :mod:`buildtile.runtime.bounds`).
"""

from __future__ import annotations

import struct

from buildtile.errors import ContractError, TypeMismatchError
from buildtile.interop.abi import launch_extras
from buildtile.runtime import bounds
from buildtile.runtime.alignment import data_pointer_positions, pointers_aligned
from buildtile.runtime import driver as _driver_module
from buildtile.runtime.contract import check_launch_config, check_unsafe_config
from buildtile.runtime.cooperative import check_co_resident
from buildtile.runtime.driver import get_driver
from buildtile.runtime.native import compiled
from buildtile.runtime.streams import MAX_STREAM_HANDLE, current_stream_source, stream_handle

#: with the compiled module, a call of a prepared launch starts in C (see the module docstring)
_LaunchBase = compiled.FastLaunch if compiled is not None else object

#: what only the functions below pass to the constructor: a prepared launch exists only for a
#: configuration they checked against its kernel's contract
_CHECKED = object()


def prepare_launch(kernel, grid, block=None, device: int | None = None) -> PreparedLaunch:
    """``kernel.prepare(grid, block)``: the configuration checked against the kernel's contract.

    A cooperative kernel's grid is checked now against what ``device`` (the calling thread's
    device when None) holds resident; a launch on another device checks it there."""
    signature = kernel.signature
    grid3, block3 = check_launch_config(signature.contract, signature.name, grid, block)
    prepared = _launch_class(kernel)(_CHECKED, kernel, grid3, block3, signature.contract.dynamic_shared)
    if signature.contract.cooperative:
        driver = get_driver()
        function = kernel.function_for(driver.current_device() if device is None else device)
        check_co_resident(driver, function, signature.name, prepared._config[:3], block3, prepared.shared_mem)
    return prepared


def prepare_unsafe_launch(kernel, grid, block, shared_mem: int) -> PreparedLaunch:
    """``kernel.unsafe_launch``'s configuration, checked against CUDA's limits only."""
    signature = kernel.signature
    grid3, block3 = check_unsafe_config(signature.name, grid, block)
    if isinstance(shared_mem, bool) or not isinstance(shared_mem, int) or shared_mem < 0:
        raise ContractError(f"shared_mem must be a non-negative int, got {shared_mem!r}")
    shared = max(shared_mem, signature.contract.dynamic_shared)
    return _launch_class(kernel)(_CHECKED, kernel, grid3, block3, shared, unsafe=True)


def _launch_class(kernel) -> type[PreparedLaunch]:
    """Only debug builds look for out-of-range reads before each launch (once its signature
    is compiled, the kernel knows its package)."""
    return CheckedPreparedLaunch if kernel.package.debug else PreparedLaunch


def refuse_keywords(names) -> None:
    """A prepared launch takes the kernel's arguments by position, and ``stream=``."""
    names = tuple(name for name in names if name != "stream") or tuple(names)
    raise TypeMismatchError(
        f"mismatched types: a prepared launch takes the kernel's arguments by position and `stream=`, "
        f"got the keyword{'s' if len(names) > 1 else ''} {', '.join(f'`{n}`' for n in names)}",
        help="pass the kernel's arguments in parameter order, without names")


class PreparedLaunch(_LaunchBase):
    """``kernel.prepare(grid=...)``: call it with the kernel's arguments to launch.

    Made only by :func:`prepare_launch` and :func:`prepare_unsafe_launch`, and immutable: its
    kernel, configuration and packing belong together, so none of them can be re-pointed.
    """

    __slots__ = (
        "kernel", "grid", "block", "shared_mem", "unsafe",
        "_signature", "_bind", "_pack", "_extras", "_offsets", "_last", "_config", "_cooperative", "_pointers_at",
    )

    def __new__(cls, token: object, *args, **kwargs):
        if token is not _CHECKED:
            raise ContractError(
                "launch contract violated: a prepared launch is made by `kernel.prepare(grid=...)` "
                "(or `kernel[grid]`), which checks its configuration against the kernel's contract",
                help="call `kernel.prepare(grid=..., block=...)` instead of constructing it")
        return super().__new__(cls)

    def __init__(self, token: object, kernel, grid: tuple[int, int, int], block: tuple[int, int, int],
                 shared_mem: int, unsafe: bool = False) -> None:
        _set = object.__setattr__
        _set(self, "kernel", kernel)
        _set(self, "grid", grid)
        _set(self, "block", block)
        _set(self, "shared_mem", shared_mem)
        _set(self, "unsafe", unsafe)
        signature = kernel.signature
        _set(self, "_signature", signature)
        _set(self, "_cooperative", signature.contract.cooperative)
        _set(self, "_bind", signature.hot_binder)
        layout = signature.layout
        # a coarsened kernel runs several logical blocks per launched block and takes the
        # logical grid.x as a trailing parameter (ABI v1, interop.abi.launch_extras)
        launched_x, extras = launch_extras({"coarsen": signature.contract.coarsen}, grid[0])
        _set(self, "_config", (launched_x, grid[1], grid[2], *block, shared_mem))
        _set(self, "_extras", tuple(extras))
        extras_at = (layout.struct.size + 7) & ~7
        padding = f"{extras_at - layout.struct.size}x" if extras else ""
        _set(self, "_pack", struct.Struct(layout.struct.format + padding + "q" * len(extras)).pack)
        _set(self, "_offsets", (*layout.offsets, *(extras_at + 8 * k for k in range(len(extras)))))
        # (values, their packed bytes) of the last launch: a launch that repeats its arguments
        # reuses the bytes. One tuple, swapped whole, so threads never see a torn pair.
        _set(self, "_last", (None, b""))
        #: where the array data pointers sit in the bound values (which entry to launch)
        _set(self, "_pointers_at", data_pointer_positions(signature.params))

    def __setattr__(self, name: str, value) -> None:
        raise ContractError(
            f"launch contract violated: a prepared launch cannot be changed (`{name}` is fixed when it "
            "is prepared, with the argument packing of its kernel)",
            help="prepare another launch: `kernel.prepare(grid=...)`")

    def __delattr__(self, name: str) -> None:
        self.__setattr__(name, None)

    if compiled is None:
        def __call__(self, *args, stream=None, **keywords) -> None:
            """Check ``args`` and queue the kernel on ``stream`` (see :mod:`buildtile.runtime.streams`)."""
            if keywords:
                refuse_keywords(keywords)
            self._launch(args, stream)

    def _refuse_keywords(self, names: tuple) -> None:
        """Called from C (``_native.c``) for a call with keywords other than ``stream=``."""
        refuse_keywords(names)

    def _launch(self, args: tuple, stream, bound=None) -> None:
        """The launch of one call, the Python way; ``bound``: what the binder already returned for
        ``args`` (None: bind them here). Arms the compiled way for the calls that follow."""
        handle = stream if type(stream) is int and 0 <= stream <= MAX_STREAM_HANDLE else stream_handle(stream, args)
        if bound is None:
            bound = self._bind(args, handle)
        if bound is None:  # other argument types than the last call's
            bind = self._signature.binder_for(args)
            _SET_BIND(self, bind)
            bound = bind(args, handle)
        values, device, env, waits = bound
        driver = _driver_module.current or get_driver()
        bound_device = device
        if device is None:
            device = self._signature.settle_device(env, driver.pointer_memory)
            if device is None:  # no array arguments: the calling thread's device
                device = driver.current_device()
        kernel = self.kernel
        hot_device, function = kernel.hot
        if device != hot_device:
            function = kernel.function_for(device)
        plain = function
        if function.aligned is not None and pointers_aligned(values, self._pointers_at, function.align):
            function = function.aligned
        if self.shared_mem > function.shared_limit:
            for entry in (plain, plain.aligned):   # the compiled way may launch either entry
                if entry is not None and self.shared_mem > entry.shared_limit:
                    kernel.allow_shared_memory(entry, self.shared_mem)
        if waits:
            for producer in waits:
                driver.stream_wait(function.context, handle, producer)
        last = self._last
        if last[0] is not values:  # a binder hands back the same tuple for the same values
            last = (values, self._pack(*values, *self._extras) if self._extras else self._pack(*values))
            _SET_LAST(self, last)
        if self._cooperative:
            # the grid must fit the device it runs on; the compiled way launches only plainly
            config = self._config
            check_co_resident(driver, function, self._signature.name, config[:3], config[3:6], config[6])
            driver.launch_cooperative(function.context, function.handle, config, handle, last[1], self._offsets)
            if compiled is not None:
                self._disarm()
            return
        driver.launch(function.context, function.handle, self._config, handle, last[1], self._offsets)
        if compiled is not None:
            # the next calls that bind the same way launch from C, with what was found here; others
            # come straight here (an arming for other arguments would only cost them a binding)
            target = driver.native_target(function.context, function.handle)
            if target is not None and bound_device is not None and not waits:
                self._arm(self._bind, bound_device, *target, self._config, self._offsets, self._pack,
                          self._extras, stream_handle, current_stream_source(args))
                if plain.aligned is not None:
                    self._arm_aligned(driver.native_target(plain.context, plain.handle)[1],
                                      driver.native_target(plain.context, plain.aligned.handle)[1],
                                      self._pointers_at, plain.align)
            else:
                self._disarm()

    def _launch_failed(self, device: int, err: int, stream: int) -> None:
        """Raise the error of a launch the compiled way made on ``device`` (it returned ``err``)."""
        driver = get_driver()
        driver.raise_launch_failure(driver.context(device), err, stream)

    def __repr__(self) -> str:
        kind = "unsafe launch" if self.unsafe else "launch"
        return (f"<prepared {kind} of {self.kernel.__name__}: grid={self.grid} block={self.block}"
                f"{f' shared_mem={self.shared_mem}' if self.shared_mem else ''}>")


#: the launch's own caches, written past :meth:`PreparedLaunch.__setattr__` (their slots' setters)
_SET_BIND = PreparedLaunch._bind.__set__
_SET_LAST = PreparedLaunch._last.__set__


class CheckedPreparedLaunch(PreparedLaunch):
    """The prepared launch of a kernel from a ``checks = "debug"`` build.

    Before anything is queued it raises :class:`~buildtile.errors.BoundsError`
    for an out-of-range read that an earlier launch recorded and nobody has
    reported yet (the records are host memory: reading them does not wait
    for the GPU). Release builds never get this class, so their launches
    pay nothing for it.
    """

    __slots__ = ()

    def __call__(self, *args, stream=None, **keywords) -> None:
        if keywords:
            refuse_keywords(keywords)
        bounds.raise_pending()
        PreparedLaunch.__call__(self, *args, stream=stream)
