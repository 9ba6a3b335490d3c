"""A checked Tile launch that owns its arguments until it is enqueued.

Calling a Tile kernel checks everything and returns a :class:`PendingLaunch`
holding the moved arguments; nothing is queued yet. The launch is queued by

- ``pending.sync_on(stream)``: enqueue on ``stream`` and give the arguments
  back, as fresh handles over the same memory, in parameter order
  (``x, y, z = ops.add(x, y, zp).sync_on(stream)``). It does **not** block
  the host: it names the stream that orders all later work on those
  tensors. Work on another stream must wait for ``stream`` first (as for
  any CUDA stream), and the host must synchronise ``stream`` before it
  reads the results.
- ``pending.launch(stream=None)``: the same, with the stream optional
  (``None``: the current PyTorch/CuPy stream of the arguments, else the
  legacy default stream, as for SIMT launches).

A pending launch runs once. ``pending.cancel()`` gives the arguments back
without running it; if enqueueing fails (a driver error), the launch stays
pending, so it can be retried or cancelled. A pending launch dropped
without either warns: its arguments were moved into it and are lost.

Each ``tile.Out`` parameter comes back as a :class:`~buildtile.runtime.
tile.handles.TileTensor` of the whole array (partition it again for the
next launch); scalars come back as given. When the grid parameter is empty
there is no tile, so nothing is queued.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass

from buildtile.errors import ContractError, MovedError
from buildtile.runtime import bounds
from buildtile.runtime.driver import get_driver
from buildtile.runtime.package import KernelFunction
from buildtile.runtime.streams import default_stream, stream_handle
from buildtile.runtime.tensor_maps import tma_arguments
from buildtile.runtime.tile.binding import TileBinding, bind, set_persistent_grid, settle_device
from buildtile.runtime.tile.handles import arrays_of, give_back, give_back_checked, move_all

_PENDING, _LAUNCHED, _CANCELLED = "pending", "launched", "cancelled"

#: what only :func:`checked_launch` passes to the constructor: a pending launch holds arguments
#: checked against its own kernel, and that kernel's function
_CHECKED = object()


def checked_launch(kernel, args: tuple) -> PendingLaunch:
    """Check ``args`` against ``kernel``, load the chosen specialization for their device, move
    their handles and return the pending launch (nothing is moved when a check refuses)."""
    sig = kernel.signature
    binder = kernel.fast_binder()
    stream = default_stream(arrays_of(args))
    binding = binder.bind(args, stream)
    if binding is None:  # not plainly right: the general way accepts it or says why not
        binding = bind(sig, args, stream)
    driver = get_driver()
    device = settle_device(sig, binding, driver.pointer_memory)
    if device is None:  # only empty arrays: the calling thread's device
        device = driver.current_device()
    function = kernel.function_for(binding.specialization, device)
    entry = _entry(sig, binding, function, driver, binder.plain_entries)
    if binding.persistent:
        set_persistent_grid(sig, binding, driver.multiprocessor_count(device), entry.block[0], entry.shared_bytes)
    sites = binder.sites
    move_all([(handle, sites[k]) for k, handle in enumerate(binding.handles) if handle is not None],
             f"passing it to `{sig.name}`")
    return PendingLaunch(_CHECKED, kernel, binding, entry)


@dataclass(frozen=True)
class LaunchEntry:
    """The entry a launch runs: the specialization's own, or its TMA entry with the encoded maps."""

    function: KernelFunction
    block: tuple[int, int, int]
    shared_bytes: int
    tensor_maps: tuple[bytes, ...] = ()


def _entry(sig, binding: TileBinding, function: KernelFunction, driver, plain: dict) -> LaunchEntry:
    """The TMA entry where it is loaded and every mapped input suits TMA, else the plain one
    (made once per function, kept in ``plain``: a LaunchEntry is immutable)."""
    spec = binding.specialization
    if function.tma is not None:
        views = {p.name: view for p, view in zip(sig.params, binding.views) if view is not None}
        maps = tma_arguments(spec.tma, views, driver)
        if maps is not None:
            return LaunchEntry(function.tma, spec.tma.block, spec.tma.shared_bytes, maps)
    entry = plain.get(id(function))
    if entry is None or entry.function is not function:  # the entry holds its function: ids stay unique
        entry = plain[id(function)] = LaunchEntry(function, spec.block, spec.shared_bytes)
    return entry


class PendingLaunch:
    """A Tile launch, checked and holding its arguments, not yet queued (see the module docstring).

    Made only by :func:`checked_launch`, and immutable but for its state: its kernel, binding
    and function belong together, so none of them can be re-pointed.
    """

    __slots__ = ("__weakref__", "_binding", "_entry", "_lock", "_state", "kernel")

    def __new__(cls, token: object, *args, **kwargs):
        if token is not _CHECKED:
            raise ContractError(
                "launch contract violated: a pending tile launch is made by calling its kernel, "
                "which checks the arguments against that kernel",
                help="call the kernel: `kernel(*args).sync_on(stream)`")
        return super().__new__(cls)

    def __init__(self, token: object, kernel, binding: TileBinding, entry: LaunchEntry) -> None:
        _set = object.__setattr__
        _set(self, "kernel", kernel)
        _set(self, "_binding", binding)
        _set(self, "_entry", entry)
        _set(self, "_state", _PENDING)
        _set(self, "_lock", threading.Lock())

    def __setattr__(self, name: str, value) -> None:
        raise ContractError(
            f"launch contract violated: a pending tile launch cannot be changed (`{name}` is fixed when "
            "its kernel checks the arguments)",
            help="call the kernel again for another launch")

    def __delattr__(self, name: str) -> None:
        self.__setattr__(name, None)

    @property
    def grid(self) -> tuple[int, int, int]:
        """Blocks along x, y, z over the tiles of the grid parameter (grid.py; a 0: nothing to launch)."""
        return self._binding.grid

    @property
    def block(self) -> tuple[int, int, int]:
        return self._entry.block

    @property
    def shared_mem(self) -> int:
        """Dynamic shared memory each block gets, in bytes."""
        return self._entry.shared_bytes

    @property
    def uses_tma(self) -> bool:
        """Whether it runs the specialization's TMA entry (sm_90a: wgmma fed by TMA)."""
        return bool(self._entry.tensor_maps)

    @property
    def tile_shapes(self) -> dict[str, tuple[int, ...]]:
        """The tile shape of each ``tile.Out`` parameter (the specialization launched)."""
        return dict(self._binding.specialization.tile_shapes)

    def sync_on(self, stream) -> tuple:
        """Enqueue on ``stream`` and return the arguments as fresh handles, in parameter order.

        Does not wait for the kernel: later work on these tensors must be
        ordered after ``stream`` (see the module docstring).
        """
        return self._enqueue(stream)

    def launch(self, stream=None) -> tuple:
        """:meth:`sync_on` with an optional stream (``None``: the arguments' framework's current stream)."""
        return self._enqueue(stream)

    def cancel(self) -> tuple:
        """Give the arguments back without launching."""
        with self._lock:
            self._claim("cancelling it")
            _SET_STATE(self, _CANCELLED)
        return self._results()

    def _enqueue(self, stream) -> tuple:
        if self.kernel.package.debug:  # an out-of-range read an earlier launch recorded, as for SIMT
            bounds.raise_pending()
        with self._lock:
            self._claim("enqueueing it")
            binding = self._binding
            handle = stream_handle(stream, binding.args)
            if 0 not in binding.grid:
                self._queue(handle)
            _SET_STATE(self, _LAUNCHED)
        return self._results()

    def _claim(self, use: str) -> None:
        if self._state != _PENDING:
            done = "enqueued" if self._state == _LAUNCHED else "cancelled"
            raise MovedError(
                f"use of moved value: this launch of `{self.kernel.__name__}` was already {done}, "
                f"so {use} is not allowed",
                help="a pending launch runs once; call the kernel again with the tensors it returned",
            )

    def _queue(self, stream: int) -> None:
        binding, entry = self._binding, self._entry
        function = entry.function
        driver = get_driver()
        for producer in self._producers(stream):
            driver.stream_wait(function.context, stream, producer)
        sig = self.kernel.signature
        layout = sig.tma_layout(len(entry.tensor_maps)) if entry.tensor_maps else sig.layout
        config = (*binding.grid, *entry.block, entry.shared_bytes)
        driver.launch(function.context, function.handle, config, stream,
                      layout.struct.pack(*binding.values, *entry.tensor_maps), layout.offsets)

    def _producers(self, stream: int) -> list[int]:
        """Streams the launch must wait for: producers named by the CUDA array interface, and the
        stream DLPack producers synchronised onto when the arguments were checked."""
        binding = self._binding
        producers = set()
        for v in binding.views:
            if v is not None:
                if v.stream is not None:
                    producers.add(v.stream)
                if v.keepalive is not None:
                    producers.add(binding.stream)
        if not producers:
            return []
        producers.discard(stream)
        return sorted(producers)

    def _results(self) -> tuple:
        binding = self._binding
        fresh = give_back_checked if binding.quick else give_back
        return tuple(arg if view is None else fresh(arg, handle)
                     for arg, handle, view in zip(binding.args, binding.handles, binding.views))

    def __repr__(self) -> str:
        return (f"<{self._state} tile launch of {self.kernel.__name__}: tile shapes "
                f"{self._binding.specialization.describe()}, grid={self.grid} block={self.block}"
                f"{f' shared_mem={self.shared_mem}' if self.shared_mem else ''}>")

    def __del__(self) -> None:
        if getattr(self, "_state", None) == _PENDING:
            try:
                warnings.warn(
                    f"a launch of `{self.kernel.__name__}` was dropped without being enqueued; the tensors "
                    "moved into it are lost (call `.sync_on(stream)`, or `.cancel()` to get them back)",
                    RuntimeWarning, stacklevel=2)
            except Exception:  # noqa: BLE001, S110 (interpreter shutdown: nothing left to warn)
                pass


#: the launch's state, written past :meth:`PendingLaunch.__setattr__` (its slot's setter)
_SET_STATE = PendingLaunch._state.__set__
