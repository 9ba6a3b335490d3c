"""One object per installed package: its manifest and its modules per device context.

A kernel finds its package from ``pyfunc.__module__``: the top-level package
of that module holds ``_buildtile/manifest.json``. The manifest is read once
per package. Images are loaded lazily, once per (artifact, context), the
first time a kernel of the package launches on a device. A package built
with ``checks = "debug"`` gives each module it loads a record for
out-of-range reads (:mod:`buildtile.runtime.bounds`); a release package
never does. A tree built in place, next to the sources, is checked against
them once per module (:mod:`buildtile.runtime.freshness`), so an edited
kernel is never launched from its old build.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from buildtile.errors import BuildtileError
from buildtile.interop import manifest as manifest_format
from buildtile.interop.driver_compat import version_number
from buildtile.interop.manifest import ArtifactRecord, KernelRecord, PackageManifest
from buildtile.runtime import bounds
from buildtile.runtime.driver import emulating, get_driver
from buildtile.runtime.freshness import rebuild_in_place, rebuild_wanted, stale_error, stale_module
from buildtile.runtime.images import ImageChoice, read_image, select_image

#: dynamic shared memory a function may use without opting in (CUDA's default limit)
DEFAULT_DYNAMIC_SHARED_LIMIT = 48 * 1024


@dataclass(eq=False)
class KernelFunction:
    """A kernel loaded into one device's primary context, ready to launch."""

    context: object          # DeviceContext
    handle: object           # the driver's function handle (CudaDriver: the CUfunction's address)
    image: ImageChoice
    #: bytes of dynamic shared memory the function is allowed to use
    shared_limit: int = DEFAULT_DYNAMIC_SHARED_LIMIT
    #: the kernel's aligned entry in the same context (manifest ``aligned``), launched instead of
    #: this one when every array data pointer is a multiple of ``align`` (runtime/alignment.py)
    aligned: KernelFunction | None = None
    align: int = 0
    #: a Tile specialization's TMA entry in the same context (manifest ``tma``), launched instead of
    #: this one when every mapped input suits TMA (runtime/tensor_maps.py)
    tma: KernelFunction | None = None


class PackageRuntime:
    """The compiled kernels of one package, as its manifest describes them."""

    def __init__(self, name: str, manifest_file: Path) -> None:
        self.name = name
        self.manifest_file = manifest_file
        data = manifest_format.load(manifest_file)
        #: the whole manifest, checked once
        self.manifest: PackageManifest = manifest_format.parse(data, str(manifest_file))
        # each kernel's entry as the JSON has it, for ``kernel.record``
        self._entries = {(k.module, k.name): raw for k, raw in zip(self.manifest.kernels, data["kernels"])}
        self.artifact_dir = manifest_file.parent
        #: the top-level package's folder (where its modules' sources sit in a tree built in place)
        self.package_dir = self.artifact_dir.parent
        #: built with ``checks = "debug"``: reads are bounds-checked and reported
        self.debug: bool = self.manifest.debug
        self._lock = threading.Lock()
        self._modules: dict[tuple[Path, int], object] = {}   # (image path, context) -> CUmodule
        self._images: dict[Path, bytes] = {}                 # verified image bytes
        #: kernel modules whose source was found unchanged since this tree was built in place
        self.fresh_modules: set[str] = set()

    def kernel_record(self, module: str, name: str) -> KernelRecord:
        record = self.manifest.kernel(module, name)
        if record is None:
            raise BuildtileError(
                f"kernel `{name}` of module `{module}` is not in the compiled kernels of package "
                f"`{self.name}` ({self.manifest_file})",
                code="BT0620",
                help="the kernel was added or renamed after the package was built: rebuild or reinstall "
                     "the package (`pip install .`, or `buildtile build` in its project)",
            )
        return record

    def manifest_entry(self, record: KernelRecord) -> dict:
        """``record``'s entry in the manifest, as the JSON has it."""
        return self._entries[(record.module, record.name)]

    def load_function(self, driver, ctx, kernel: KernelRecord, symbol: str,
                      artifacts: tuple[ArtifactRecord, ...]) -> KernelFunction:
        """Load (once per context) the best of ``artifacts`` (the images of ``kernel``'s entry
        ``symbol``) for ``ctx`` and get that entry."""
        image = select_image(kernel.name, artifacts, self.artifact_dir, ctx.capability, package=self.name,
                             device=ctx.describe(), driver_version=version_number(driver.driver_version()))
        key = (image.path, ctx.handle_int)
        with self._lock:
            module = self._modules.get(key)
            if module is None:
                data = self._images.get(image.path)
                if data is None:
                    data = self._images[image.path] = read_image(image, kernel.name)
                module = driver.load_module(ctx, data, f"{image.describe()} of kernel `{kernel.name}`")
                if self.debug:
                    bounds.watch_module(driver, ctx, module, kernel)
                self._modules[key] = module
        handle = driver.get_function(module, symbol)
        return KernelFunction(ctx, handle, image)


_packages: dict[str, PackageRuntime] = {}
_packages_lock = threading.Lock()
_rebuild_lock = threading.Lock()   # one check (and rebuild) of an in-place tree at a time


class ManifestBound:
    """What kernel handles share: on first use, the package and manifest record of ``pyfunc``,
    and the signature :meth:`compile_signature` makes of them (once, under a lock)."""

    kind: str

    def __init__(self, pyfunc: Callable, kind: str) -> None:
        functools.update_wrapper(self, pyfunc)
        self.pyfunc = pyfunc
        self.kind = kind
        self.lock = threading.RLock()  # binding and per-device loading (re-entered by subclasses)
        self._package: PackageRuntime | None = None
        self._record: KernelRecord | None = None
        self._signature = None   # set last: once it is, the other two are

    def compile_signature(self, package: PackageRuntime, record: KernelRecord):
        """The kernel's signature (each kind of kernel has its own); called once."""
        raise NotImplementedError

    def _bind(self):
        with self.lock:
            if self._signature is None:
                package, record = bind_to_manifest(self.pyfunc, self.kind)
                signature = self.compile_signature(package, record)
                self._package, self._record = package, record
                self._signature = signature
            return self._signature

    @property
    def signature(self):
        """Parameters, contract and ``requires`` of the compiled kernel (reads the manifest once)."""
        signature = self._signature
        if signature is None:
            signature = self._bind()
        return signature

    @property
    def manifest_record(self) -> KernelRecord:
        """This kernel's checked record in the package manifest."""
        if self._signature is None:
            self._bind()
        return self._record  # type: ignore[return-value]

    @property
    def record(self) -> dict:
        """This kernel's entry in the package manifest, as the JSON has it."""
        return self.package.manifest_entry(self.manifest_record)

    @property
    def package(self) -> PackageRuntime:
        """The runtime of the package this kernel was compiled into."""
        if self._signature is None:
            self._bind()
        return self._package  # type: ignore[return-value]


def bind_to_manifest(pyfunc, kind: str) -> tuple[PackageRuntime, KernelRecord]:
    """The package runtime and manifest record of the kernel ``pyfunc`` of kind ``kind``."""
    module, name = pyfunc.__module__, pyfunc.__name__
    if emulating():
        get_driver()   # the emulator's array extractors must be in place before a binder is made
    package = package_runtime(module, name)
    if package.manifest.in_place_project is not None and module not in package.fresh_modules:
        package = fresh_package_runtime(module, name)
    record = package.kernel_record(module, name)
    if record.kind != kind:
        raise BuildtileError(
            f"kernel `{name}` is declared as a {kind} kernel but the manifest of package "
            f"`{package.name}` lists it as {record.kind!r}",
            code="BT0620",
            help="the package is out of date: rebuild or reinstall it",
        )
    return package, record


def package_runtime(module: str, kernel: str = "") -> PackageRuntime:
    """The runtime of the package that contains ``module`` (reads its manifest on first use)."""
    top = module.partition(".")[0]
    runtime = _packages.get(top)
    if runtime is not None:
        return runtime
    with _packages_lock:
        runtime = _packages.get(top)
        if runtime is None:
            runtime = _packages[top] = PackageRuntime(top, find_manifest(module, kernel))
        return runtime


def fresh_package_runtime(module: str, kernel: str) -> PackageRuntime:
    """The runtime of ``module``'s package once ``module``'s source is checked against the tree built
    in place: rebuilt first when it changed and ``BUILDTILE_EDITABLE_REBUILD`` asks for it, else refused."""
    with _rebuild_lock:
        package = package_runtime(module, kernel)   # a rebuild by another thread replaced it
        if module in package.fresh_modules:
            return package
        project = package.manifest.in_place_project
        stale = stale_module(package.manifest, package.package_dir, module)
        rebuilt = False
        if stale is not None and project is not None and rebuild_wanted():
            rebuilt = rebuild_in_place(project)
            if rebuilt:
                forget_package(package.name)
                package = package_runtime(module, kernel)
                stale = stale_module(package.manifest, package.package_dir, module)
        if stale is not None:
            raise stale_error(package.name, stale, kernel, project or str(package.package_dir),
                              rebuild_failed=rebuild_wanted() and not rebuilt)
        package.fresh_modules.add(module)
        return package


def forget_package(name: str) -> None:
    """Drop a package's cached manifest and modules (for tests and rebuilds in place)."""
    with _packages_lock:
        _packages.pop(name, None)


def find_manifest(module: str, kernel: str = "") -> Path:
    """``<top-level package dir>/_buildtile/manifest.json`` for ``module``."""
    what = f"kernel `{kernel}`" if kernel else f"module `{module}`"
    if module in ("__main__", "") or module.startswith("__main__."):
        raise BuildtileError(
            f"{what} is defined in a script, not in a package, so it was never compiled",
            code="BT0620",
            help="define kernels in a module of your package and list it under `kernels` in "
                 "[tool.buildtile] of the package's pyproject.toml",
        )
    top = module.partition(".")[0]
    locations = _package_locations(top)
    if not locations:
        raise BuildtileError(
            f"{what} belongs to `{top}`, which is not a package (no directory to hold its compiled kernels)",
            code="BT0620",
            help="kernels must live in a package built by buildtile",
        )
    for location in locations:
        candidate = manifest_format.manifest_path(location)
        if candidate.is_file():
            return candidate
    expected = manifest_format.manifest_path(locations[0])
    raise BuildtileError(
        f"no compiled kernels found for {what}: {expected} does not exist",
        code="BT0620",
        help=f"build and install package `{top}` (`pip install .` in its project, "
             "or `buildtile build` for a development checkout)",
    )


def _package_locations(top: str) -> list[Path]:
    mod = sys.modules.get(top)
    paths = list(getattr(mod, "__path__", None) or []) if mod is not None else []
    if not paths:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            paths = list(spec.submodule_search_locations)
    return [Path(p) for p in paths]
