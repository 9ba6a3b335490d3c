"""``tile.partition(array, tile_shape)``: an output seen as a grid of tiles.

A :class:`Partition` is what a ``tile.Out`` parameter takes. It owns its
array (like a :class:`~buildtile.runtime.tile_tensor.TileTensor`) and fixes
the tile shape, which selects the compiled specialization and, with the
array's shape, the launch grid: ``ceil(shape[d] / tile_shape[d])`` tiles
along each axis ``d``, the last axis along grid x (DESIGN §3)::

    zp = tile.partition(z, [128])            # 1000 elements -> 8 tiles (the last one ragged)
    zp.num_tiles                             # (8,)

Partitioning a TileTensor moves it into the partition; a raw CUDA array is
wrapped implicitly. ``zp.into_tensor()`` gives the tensor back unlaunched.
"""

from __future__ import annotations

import operator

from buildtile.errors import ContractError, TypeMismatchError
from buildtile.runtime.contract import Dim3
from buildtile.runtime.tile_tensor import MoveSite, OwnedHandle, TileTensor, move_all


class Partition(OwnedHandle):
    """An array and the shape of the tiles it is cut into (see the module docstring)."""

    __slots__ = ("_shape", "_tile_shape")
    _kind = "Partition"

    def __init__(self, array: object, tile_shape: tuple[int, ...], shape: tuple[int, ...],
                 name: str | None = None) -> None:
        super().__init__(array, name)
        self._tile_shape = tile_shape
        self._shape = shape

    @property
    def tile_shape(self) -> tuple[int, ...]:
        """Extent of one tile along each axis."""
        self._live("reading `.tile_shape`")
        return self._tile_shape

    @property
    def shape(self) -> tuple[int, ...]:
        """The whole array's shape."""
        self._live("reading `.shape`")
        return self._shape

    @property
    def num_tiles(self) -> tuple[int, ...]:
        """Tiles along each axis (a ragged last tile counts)."""
        self._live("reading `.num_tiles`")
        return tile_counts(self._shape, self._tile_shape)

    @property
    def array(self) -> object:
        """The partitioned array object."""
        return self._live("reading `.array`")

    def into_tensor(self) -> TileTensor:
        """Give the tensor back as a TileTensor; this partition is moved."""
        array = self._live("taking its tensor with `.into_tensor()`")
        move_all([(self, MoveSite("a TileTensor by `.into_tensor()`", help="use the TileTensor it returned"))],
                 "taking its tensor with `.into_tensor()`")
        return TileTensor(array, name=self._name)

    def __repr__(self) -> str:
        if self._moved is not None:
            return f"<Partition {self._label(self._moved)} moved into {self._moved.into}>"
        named = f" `{self._name}`" if self._name else ""
        return f"<Partition{named} of shape {self._shape} into tiles of {self._tile_shape}>"


def partition(array: object, tile_shape) -> Partition:
    """Cut ``array`` (a TileTensor, which is moved, or any CUDA array) into tiles of ``tile_shape``.

    ``tile_shape`` holds one positive int per axis of the array (an int is
    accepted for 1-D arrays). Refusals are BT0600 (the tile shape) and BT0308
    (not an array); nothing is moved when one is raised.
    """
    if isinstance(array, Partition):
        raise ContractError(
            f"cannot partition a partition again (it has tile shape {array.tile_shape})",
            help="take the tensor back with `.into_tensor()` and partition that",
        )
    handle = array if isinstance(array, TileTensor) else None
    raw = handle._live("partitioning it") if handle is not None else array
    if handle is None:
        TileTensor(raw)  # the same check of what an array is
    shape = array_shape(raw)
    tiles = _tile_shape(tile_shape, shape)
    name = handle._name if handle is not None else None
    if handle is not None:
        move_all([(handle, MoveSite(f"a partition (tile shape {tiles})",
                                     help="use the partition; a launch gives the tensor back from "
                                          "`.sync_on(stream)`, and `partition.into_tensor()` returns it unlaunched"))],
                 "partitioning it")
    return Partition(raw, tiles, shape, name)


def _tile_shape(tile_shape, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``tile_shape`` as a tuple of ints, checked against the array's ``shape``."""
    items = tile_shape if isinstance(tile_shape, (list, tuple)) else (tile_shape,)
    try:
        if any(isinstance(t, bool) for t in items):
            raise TypeError
        tiles = tuple(operator.index(t) for t in items)
    except TypeError:
        raise ContractError(f"a tile shape is a list of ints, one per axis, got {tile_shape!r}") from None
    if len(tiles) != len(shape):
        raise ContractError(
            f"cannot cut a {len(shape)}-D array of shape {shape} into {len(tiles)}-D tiles {tiles}",
            help="give one tile extent per axis of the array",
        )
    if any(t < 1 for t in tiles):
        raise ContractError(f"tile extents must be at least 1, got tile shape {tiles}")
    return tiles


def array_shape(array: object) -> tuple[int, ...]:
    """The shape of any array object, without exporting it (its ``.shape`` or its CUDA array interface)."""
    shape = getattr(array, "shape", None)
    if shape is None and hasattr(array, "__cuda_array_interface__"):
        shape = array.__cuda_array_interface__.get("shape")
    try:
        return tuple(int(n) for n in shape)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise TypeMismatchError(
            f"mismatched types: cannot read the shape of the {type(array).__qualname__} to partition",
            help="partition an array with a `.shape`, such as a PyTorch or CuPy array",
        ) from None


def tile_counts(shape: tuple[int, ...], tile_shape: tuple[int, ...]) -> tuple[int, ...]:
    """``ceil(shape[d] / tile_shape[d])`` per axis."""
    return tuple(-(-n // t) for n, t in zip(shape, tile_shape))


def tile_grid(shape: tuple[int, ...], tile_shape: tuple[int, ...]) -> Dim3:
    """The launch grid of one block per tile: axis rank-1 along x, rank-2 along y, rank-3 along z.

    A rank-0 array is one tile. An empty axis gives a 0 (no blocks: nothing to launch).
    """
    counts = tile_counts(shape, tile_shape)
    along_xyz = tuple(reversed(counts)) + (1, 1, 1)
    return along_xyz[0], along_xyz[1], along_xyz[2]
