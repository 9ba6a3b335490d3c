"""The SIMT track's language surface: ``@simt.kernel``, ``simt.index_1d()``...

Inside a kernel these names are read by the compiler from the source, never
executed. At import time of a user's module, ``@simt.kernel`` returns a
launchable handle bound to the kernel's compiled artifacts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def kernel(
    fn: Callable | None = None,
    *,
    block: int | Sequence[int] | None = None,
    min_blocks: int | None = None,
    dynamic_shared: int = 0,
    min_compute_capability: str | int | None = None,
    requires: Sequence[str] = (),
    cooperative: bool = False,
):
    """Declare a SIMT kernel and, with ``block=``, its launch contract (``cooperative=True``:
    launched so that every block is resident at once, which ``simt.grid_sync()`` needs)."""

    def wrap(pyfunc: Callable):
        from buildtile.runtime.frameworks import kernel_defined
        from buildtile.runtime.kernel import Kernel

        handle = Kernel(pyfunc, kind="simt")
        kernel_defined(handle)
        return handle

    return wrap(fn) if fn is not None else wrap


def device(fn: Callable) -> Callable:
    """Declare a device helper function callable from kernels."""
    fn.__buildtile_device__ = True
    return fn


def record(cls: type) -> type:
    """Declare a record element type: a class of scalar fields (``x: f32``), laid out as the
    C struct of those fields. Arrays of it are kernel parameters: ``Slice[Particle]``."""
    cls.__buildtile_record__ = True
    return cls


def _device_only(name: str):
    def stub(*args, **kwargs):
        raise RuntimeError(f"simt.{name}() can only be used inside a @simt.kernel")

    stub.__name__ = name
    return stub


index_1d = _device_only("index_1d")
index_2d = _device_only("index_2d")
index_3d = _device_only("index_3d")
grid = _device_only("grid")
gridsize = _device_only("gridsize")
sync_threads = _device_only("sync_threads")
grid_sync = _device_only("grid_sync")
syncwarp = _device_only("syncwarp")
lane_id = _device_only("lane_id")
warp_id = _device_only("warp_id")
shfl_down = _device_only("shfl_down")
shfl_up = _device_only("shfl_up")
shfl_xor = _device_only("shfl_xor")
shfl_idx = _device_only("shfl_idx")
ballot = _device_only("ballot")
mulhi = _device_only("mulhi")
shared_array = _device_only("shared_array")
dynamic_shared_array = _device_only("dynamic_shared_array")
any = _device_only("any")  # noqa: A001 - simt.any(pred), a warp vote, as in CUDA's __any_sync
all = _device_only("all")  # noqa: A001


class _Dim3:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, axis: str):
        raise RuntimeError(f"simt.{self._name}.{axis} can only be used inside a @simt.kernel")


thread_idx = _Dim3("thread_idx")
block_idx = _Dim3("block_idx")
block_dim = _Dim3("block_dim")
grid_dim = _Dim3("grid_dim")


class unsafe:
    """``with simt.unsafe():`` marks code outside the safety proof (shared memory)."""

    def __enter__(self):
        raise RuntimeError("simt.unsafe() can only be used inside a @simt.kernel")

    def __exit__(self, *exc):
        return False
