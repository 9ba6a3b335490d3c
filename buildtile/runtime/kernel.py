"""The launchable handle that ``@simt.kernel`` returns.

A :class:`Kernel` is created when the user's module is imported, long before
anything about the GPU is known, so it does nothing then. On first use it
finds its package's manifest, compiles its signature (parameters,
contract, ``requires``), and from then on launches through
:class:`~buildtile.runtime.launch.PreparedLaunch` objects::

    ops.vecadd[grid](a, b, c, stream=s)            # contract block
    ops.vecadd[grid, (256,)](a, b, c)              # block given: must equal the contract
    launch = ops.vecadd.prepare(grid=grid)         # validate once ...
    launch(a, b, c)                                # ... launch many times
    ops.raw.unsafe_launch(grid, block, *args)      # kernels without a contract
"""

from __future__ import annotations

from collections.abc import Callable

from buildtile.errors import BuildtileError, ContractError
from buildtile.runtime.contract import check_compute_capability, dim3, is_plain_config
from buildtile.runtime.driver import get_driver
from buildtile.runtime.launch import PreparedLaunch, prepare_launch, prepare_unsafe_launch
from buildtile.interop.manifest import KernelRecord
from buildtile.runtime.package import KernelFunction, ManifestBound, PackageRuntime
from buildtile.runtime.signature import KernelSignature

#: ``kernel[grid]`` keeps this many prepared configurations before starting over
_MAX_CACHED_CONFIGS = 256


class Kernel(ManifestBound):
    """A compiled kernel of an installed package, launched as ``kernel[grid](*args)``."""

    def __init__(self, pyfunc: Callable, kind: str = "simt") -> None:
        super().__init__(pyfunc, kind)
        self._functions: dict[int, KernelFunction] = {}
        self._configs: dict[object, PreparedLaunch] = {}
        #: (device, function) of the last launch, so the hot path compares one int instead of
        #: a lookup; one tuple, so threads never see a device paired with another's function
        self.hot: tuple[int, KernelFunction | None] = (-1, None)

    # ------------------------------------------------------------------ binding to the manifest

    def compile_signature(self, package: PackageRuntime, record: KernelRecord) -> KernelSignature:
        return KernelSignature(record)

    # ------------------------------------------------------------------ launching

    def __getitem__(self, config) -> PreparedLaunch:
        """``kernel[grid]`` or ``kernel[grid, block]``.

        A tuple of ints is a grid (``kernel[(gx, gy)]`` is a 2-D grid); a pair
        in which either item is itself a tuple or list is ``(grid, block)``.
        """
        try:
            prepared = self._configs.get(config)
        except TypeError:  # unhashable (a list): prepare without caching
            return self._prepare_key(config)
        if prepared is not None and type(config) is not int and not is_plain_config(config):
            # (1.0,) and (True,) equal (1,): only a key of plain ints may take its launch
            return self._prepare_key(config)
        if prepared is None:
            prepared = self._prepare_key(config)
            if not is_plain_config(config):
                return prepared
            if len(self._configs) >= _MAX_CACHED_CONFIGS:
                self._configs.clear()
            self._configs[config] = prepared
        return prepared

    def _prepare_key(self, config) -> PreparedLaunch:
        if (isinstance(config, tuple) and len(config) == 2
                and any(isinstance(item, (tuple, list)) for item in config)):
            grid, block = config
        else:
            grid, block = config, None
        return self.prepare(grid=grid, block=block)

    def prepare(self, grid, block=None, *, device: int | None = None) -> PreparedLaunch:
        """Validate a launch configuration against the contract; return a callable launch.

        ``block`` may be left out (the contract's block is used); if given it
        must equal the contract's. With ``device``, the device-dependent part
        of the contract (``min_compute_capability``, an image for the device)
        is checked now instead of at the first launch on that device.
        """
        self._check_kind()
        prepared = prepare_launch(self, grid, block, device)
        if device is not None:
            self.function_for(device)
        return prepared

    def unsafe_launch(self, grid, block, *args, stream=None, shared_mem: int = 0) -> None:
        """Launch with a caller-chosen configuration, outside the contract's guarantees.

        The arguments are still checked (types, aliasing, ``requires``); only
        the configuration is the caller's responsibility, within CUDA's limits.
        This is the only way to launch a kernel that declares no block shape.
        """
        self._check_kind()
        prepare_unsafe_launch(self, grid, block, shared_mem)(*args, stream=stream)

    def __call__(self, *args, **kwargs):
        name = self.__name__
        raise ContractError(
            f"kernel `{name}` needs a launch configuration: call it as `{name}[grid](...)`",
            help=f"e.g. `{name}[{name}.grid_for(n)](...)`, or `{name}.prepare(grid=...)(...)`",
        )

    def grid_for(self, *extents: int) -> tuple[int, ...]:
        """The smallest grid whose threads cover ``extents`` with the contract's block.

        Extents are given in the order ``index_Nd()`` returns its components,
        which is the order of an array's shape: ``matadd.grid_for(rows, cols)``.
        The last component runs along the grid's x axis (the fastest), so
        with ``block=(16, 16)`` that is ``(ceil(cols / 16), ceil(rows / 16))``;
        ``vecadd.grid_for(n)`` with ``block=256`` is ``(ceil(n / 256),)``.
        An extent of 0 still gives one block (the kernel's bounds test skips it).
        """
        block = self.signature.contract.block
        if block is None:
            raise ContractError(f"kernel `{self.__name__}` has no contract block to size a grid with")
        if not 1 <= len(extents) <= 3:
            raise ContractError(f"grid_for() takes 1 to 3 extents, got {len(extents)}")
        sizes = dim3(extents, "extents")[:len(extents)]
        if any(n < 0 for n in sizes):
            raise ContractError(f"grid_for() extents must not be negative, got {extents}")
        along_xyz = tuple(reversed(sizes))
        return tuple(max(1, -(-n // b)) for n, b in zip(along_xyz, block))

    def _check_kind(self) -> None:
        if self.kind != "simt":
            raise BuildtileError(
                f"kernel `{self.__name__}` is a {self.kind} kernel; this runtime launches SIMT kernels only",
                code="BT0600",
            )

    # ------------------------------------------------------------------ per device

    def function_for(self, device: int) -> KernelFunction:
        """The loaded function for ``device``: contract checked, image chosen and loaded, once
        (and :attr:`hot` from now on)."""
        function = self._functions.get(device)
        if function is None:
            with self.lock:
                function = self._functions.get(device)
                if function is None:
                    function = self._load(device)
                    self._functions[device] = function
        self.hot = (device, function)
        return function

    def _load(self, device: int) -> KernelFunction:
        signature = self.signature
        driver = get_driver()
        ctx = driver.context(device)
        check_compute_capability(signature.contract, signature.name, device, ctx.capability)
        record = self.manifest_record
        function = self.package.load_function(driver, ctx, record, record.symbol, record.artifacts)
        if record.aligned is not None:
            function.aligned = self.package.load_function(driver, ctx, record, record.aligned.symbol,
                                                          record.aligned.artifacts)
            function.align = record.aligned.align
        for loaded in (function, function.aligned):
            if loaded is not None and signature.contract.dynamic_shared > loaded.shared_limit:
                self.allow_shared_memory(loaded, signature.contract.dynamic_shared)
        return function

    @staticmethod
    def allow_shared_memory(function: KernelFunction, nbytes: int) -> None:
        """Raise the function's dynamic shared memory limit to ``nbytes`` (above 48 KiB needs opt-in)."""
        get_driver().set_dynamic_shared(function.handle, nbytes)
        function.shared_limit = nbytes

    def __repr__(self) -> str:
        return f"<buildtile {self.kind} kernel {self.__module__}.{self.__qualname__}>"
