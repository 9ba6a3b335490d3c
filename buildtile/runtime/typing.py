"""The types a kernel package's stubs describe its kernels with.

A built kernel wheel carries a ``.pyi`` stub beside each kernel module
(:mod:`buildtile.interop.stubs` writes them), so type checkers see each
kernel's parameters. The stubs refer to the names here: each SIMT kernel
is a :class:`SimtKernel` whose ``kernel[grid]`` and ``kernel.prepare(...)``
give a launch with the kernel's own typed ``__call__``; each tile kernel a
:class:`TileKernel` with a typed ``__call__``.

Only type checkers read these classes: the handles the decorators return
at run time are the runtime's own. Nothing here imports NumPy or the driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, Union

if TYPE_CHECKING:
    from buildtile.runtime.device_array import DeviceArray

__all__ = [
    "ArrayArg", "CudaArray", "DLPackArray", "Grid", "LaunchConfig", "SimtKernel", "SimtLaunch",
    "StreamArg", "TileKernel", "TileLaunch", "TilePartitionArg", "TileTensorArg",
]


class CudaArray(Protocol):
    """An array a kernel reads through ``__cuda_array_interface__`` (CuPy, Numba, DeviceArray)."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...


class DLPackArray(Protocol):
    """An array a kernel reads through DLPack (PyTorch, JAX, CuPy)."""

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...

    def __dlpack_device__(self) -> tuple[int, int]: ...


#: what an array parameter of a kernel accepts (Union: DeviceArray is named, not imported, which keeps
#: this module free of NumPy)
ArrayArg = Union[CudaArray, DLPackArray, "DeviceArray"]

#: a stream: a raw ``CUstream`` handle, an object with ``__cuda_stream__``, a PyTorch or CuPy stream;
#: ``None`` is the arguments' current stream
StreamArg = Any

#: a grid: blocks along x, or along (x, y) or (x, y, z)
Grid = int | tuple[int] | tuple[int, int] | tuple[int, int, int] | list[int]
#: ``kernel[grid]`` or ``kernel[grid, block]``
LaunchConfig = Grid | tuple[Grid, Grid]


class SimtLaunch(Protocol):
    """A checked launch configuration; a kernel's stub gives its ``__call__`` the kernel's parameters."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]


LaunchT_co = TypeVar("LaunchT_co", bound=SimtLaunch, covariant=True)


class SimtKernel(Protocol, Generic[LaunchT_co]):
    """A SIMT kernel handle: ``kernel[grid](*args, stream=s)`` or ``kernel.prepare(grid=...)(*args)``."""

    __name__: str

    def __getitem__(self, config: LaunchConfig) -> LaunchT_co: ...

    def prepare(self, grid: Grid, block: Grid | None = None, *, device: int | None = None) -> LaunchT_co: ...

    def grid_for(self, *extents: int) -> tuple[int, ...]: ...

    def unsafe_launch(self, grid: Grid, block: Grid, *args: Any, stream: StreamArg = None,
                      shared_mem: int = 0) -> None: ...


class TileTensorArg(Protocol):
    """An owned handle over an array (``tile.tensor(x)``, or what a launch gives back)."""

    @property
    def array(self) -> object: ...


class TilePartitionArg(Protocol):
    """An output cut into tiles (``tile.partition(z, [128])``), for a ``tile.Out`` parameter."""

    @property
    def tile_shape(self) -> tuple[int, ...]: ...

    @property
    def num_tiles(self) -> tuple[int, ...]: ...


class TileLaunch(Protocol):
    """A checked Tile launch holding its arguments: ``.sync_on(stream)``, ``.launch()`` or ``.cancel()``."""

    @property
    def grid(self) -> tuple[int, int, int]: ...

    def sync_on(self, stream: StreamArg) -> tuple[Any, ...]: ...

    def launch(self, stream: StreamArg = None) -> tuple[Any, ...]: ...

    def cancel(self) -> tuple[Any, ...]: ...


class TileKernel(Protocol):
    """A Tile kernel handle; a kernel's stub gives its ``__call__`` the kernel's parameters."""

    __name__: str

    @property
    def tile_shapes(self) -> list[dict[str, tuple[int, ...]]]: ...
