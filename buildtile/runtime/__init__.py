"""The Python host: launching a package's compiled kernels.

``@simt.kernel`` returns a :class:`Kernel`; launch it as ``kernel[grid](*args,
stream=s)`` or through ``kernel.prepare(grid=...)``. Arguments are PyTorch
tensors, CuPy arrays, :class:`DeviceArray`\\ s, any object with
``__cuda_array_interface__`` or ``__dlpack__``, and Python/NumPy scalars.
Everything is checked before the launch is queued; see the modules for the
layers:

- :mod:`~buildtile.runtime.kernel` — the handle, its manifest and per-device functions
- :mod:`~buildtile.runtime.launch` — prepared launches and the hot path
- :mod:`~buildtile.runtime.signature`, :mod:`~buildtile.runtime.binders` — argument checks (no
  driver involved) and the binders generated for them
- :mod:`~buildtile.runtime.refusals` — the words of a refused launch, for both kinds of kernel
- :mod:`~buildtile.runtime.arrays`, :mod:`~buildtile.runtime.dlpack` — reading array arguments;
  :mod:`~buildtile.runtime.record_arrays` — arrays of records (:func:`record_dtype`)
- :mod:`~buildtile.runtime.contract`, :mod:`~buildtile.runtime.requires` — launch contracts
- :mod:`~buildtile.runtime.images`, :mod:`~buildtile.runtime.package` — images and manifests
- :mod:`~buildtile.runtime.bounds` — out-of-range reads of debug builds, reported at
  :func:`synchronize`
- :mod:`~buildtile.runtime.driver` — the only module that calls the CUDA driver
- :mod:`buildtile.runtime.tile` — the same for Tile kernels: handles, partitions, pending launches

Every module reads the package manifest through the one checked model of
:mod:`buildtile.interop.manifest`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["DeviceArray", "Kernel", "PreparedLaunch", "cuda_available", "record_dtype", "synchronize"]

if TYPE_CHECKING:
    from buildtile.runtime.device_array import DeviceArray
    from buildtile.runtime.kernel import Kernel
    from buildtile.runtime.launch import PreparedLaunch
    from buildtile.runtime.record_arrays import record_dtype
    from buildtile.runtime.streams import synchronize


def __getattr__(name: str):
    # imported lazily: `import buildtile.runtime` must stay cheap and must not need NumPy
    if name == "DeviceArray":
        from buildtile.runtime.device_array import DeviceArray

        return DeviceArray
    if name == "Kernel":
        from buildtile.runtime.kernel import Kernel

        return Kernel
    if name == "PreparedLaunch":
        from buildtile.runtime.launch import PreparedLaunch

        return PreparedLaunch
    if name == "record_dtype":
        from buildtile.runtime.record_arrays import record_dtype

        return record_dtype
    if name == "synchronize":
        from buildtile.runtime.streams import synchronize

        return synchronize
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def cuda_available() -> tuple[bool, str]:
    """Whether a CUDA GPU can be used here: ``(True, "NVIDIA H200 (sm_90), driver 13.0")``
    or ``(False, reason)``. Never raises."""
    from buildtile.errors import BuildtileError
    from buildtile.runtime.driver import get_driver

    driver = get_driver()
    try:
        count = driver.device_count()
        if count == 0:
            return False, "the CUDA driver reports no GPU"
        name, (cc_major, cc_minor) = driver.device_properties(0)
        major, minor = driver.driver_version()
    except BuildtileError as exc:
        reason = exc.message
        for prefix, cause in (("no CUDA GPU found: ", ""),
                              ("no CUDA driver found: ", "the NVIDIA driver (libcuda) could not be loaded: ")):
            if reason.startswith(prefix):
                reason = cause + reason[len(prefix):]
        return False, reason
    extra = f" (+{count - 1} more)" if count > 1 else ""
    return True, f"{name} (sm_{cc_major}{cc_minor}){extra}, CUDA driver {major}.{minor}"
