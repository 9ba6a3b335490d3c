"""The launchable handle that ``@tile.kernel`` returns.

A Tile kernel is called with its arguments and no grid — the grid is one
block per tile of its output partition::

    z = tile.partition(z, [128])                  # picks the 128-wide specialization
    x, y, z = ops.add(x, y, z).sync_on(stream)    # check, move, enqueue, get the tensors back

Calling it checks everything (:mod:`~buildtile.runtime.tile.binding`),
loads the chosen specialization's image for the arguments' device, moves
the argument handles into a :class:`~buildtile.runtime.tile.launch.
PendingLaunch` and returns that; nothing is moved when a check refuses.

Like a SIMT :class:`~buildtile.runtime.kernel.Kernel`, it is created when
the user's module is imported and reads its package's manifest on first
use; modules load once per (specialization, device) through the package's
cache.
"""

from __future__ import annotations

from collections.abc import Callable

from buildtile.errors import ContractError
from buildtile.interop.manifest import KernelRecord, SpecializationRecord
from buildtile.runtime.contract import check_compute_capability
from buildtile.runtime.driver import get_driver
from buildtile.runtime.images import runs_on
from buildtile.runtime.package import KernelFunction, ManifestBound, PackageRuntime
from buildtile.runtime.tile.fast_binding import FastBinder
from buildtile.runtime.tile.launch import PendingLaunch, checked_launch
from buildtile.runtime.tile.signature import TileSignature


class TileKernel(ManifestBound):
    """A compiled Tile kernel of an installed package: ``kernel(*args).sync_on(stream)``."""

    def __init__(self, pyfunc: Callable) -> None:
        super().__init__(pyfunc, "tile")
        self._functions: dict[tuple[str, int], KernelFunction] = {}
        self._fast_binder: FastBinder | None = None

    # ------------------------------------------------------------------ binding to the manifest

    def compile_signature(self, package: PackageRuntime, record: KernelRecord) -> TileSignature:
        return TileSignature(record)

    @property
    def tile_shapes(self) -> list[dict[str, tuple[int, ...]]]:
        """The compiled specializations: the tile shape of each ``tile.Out`` parameter."""
        return [dict(spec.tile_shapes) for spec in self.signature.specializations]

    # ------------------------------------------------------------------ launching

    def __call__(self, *args) -> PendingLaunch:
        """Check ``args``, move their handles and return the pending launch (see the module docstring)."""
        return checked_launch(self, args)

    def fast_binder(self) -> FastBinder:
        """The binder of this kernel's plainly right launches (made on first use, for its signature)."""
        binder = self._fast_binder
        if binder is None or binder.sig is not self.signature:
            binder = self._fast_binder = FastBinder(self.signature)
        return binder

    def __getitem__(self, config):
        name = self.__name__
        raise ContractError(
            f"tile kernel `{name}` takes no launch configuration: its grid is one block per tile "
            "of its output partition",
            help=f"call it as `{name}(..., tile.partition(out, tile_shape)).sync_on(stream)`",
        )

    # ------------------------------------------------------------------ per device

    def function_for(self, spec: SpecializationRecord, device: int) -> KernelFunction:
        """The loaded function of specialization ``spec`` on ``device`` (loaded once), with its TMA
        entry loaded too (``function.tma``) where the device runs one of that entry's images."""
        key = (spec.symbol, device)
        function = self._functions.get(key)
        if function is None:
            with self.lock:
                function = self._functions.get(key)
                if function is None:
                    function = self._functions[key] = self._load(spec, device)
        return function

    def _load(self, spec: SpecializationRecord, device: int) -> KernelFunction:
        sig = self.signature
        driver = get_driver()
        ctx = driver.context(device)
        check_compute_capability(sig.contract, sig.name, device, ctx.capability)
        function = self._load_entry(driver, ctx, spec.symbol, spec.artifacts, spec.shared_bytes)
        tma = spec.tma
        if tma is not None and driver.tensor_maps and runs_on(tma.artifacts, ctx.capability):
            function.tma = self._load_entry(driver, ctx, tma.symbol, tma.artifacts, tma.shared_bytes)
        return function

    def _load_entry(self, driver, ctx, symbol: str, artifacts, shared_bytes: int) -> KernelFunction:
        function = self.package.load_function(driver, ctx, self.manifest_record, symbol, artifacts)
        if shared_bytes > function.shared_limit:  # above 48 KiB needs an explicit opt-in
            driver.set_dynamic_shared(function.handle, shared_bytes)
            function.shared_limit = shared_bytes
        return function

    def __repr__(self) -> str:
        return f"<buildtile tile kernel {self.__module__}.{self.__qualname__}>"
