"""The owned handles a Tile launch takes — tensors and partitions — and what using one after a move does.

A Tile launch takes ownership of its arguments (docs/ownership.md, BT0382): the
arrays are the kernel's until the launch is enqueued, and the caller gets
them back, as fresh handles, from ``.sync_on(stream)``. Python cannot
invalidate a variable, so ownership lives in a handle that buildtile owns:

    x = tile.tensor(torch_x)             # a TileTensor over torch_x's memory
    z = tile.partition(torch_z, [128])   # a Partition (wraps torch_z implicitly)
    x, y, z = ops.add(x, y, z).sync_on(stream)

Passing a handle to a launch (or to ``tile.partition``) *moves* it: from then
on every use of the old handle — an attribute, ``.array``, the CUDA array
interface, DLPack, passing it again — raises :class:`~buildtile.errors.
MovedError` (BT0382) naming where it went. ``repr()`` keeps working, so
debuggers and error messages can still show it.

The raw array (``torch_x`` above) is not tracked: Python gives buildtile no
way to see its uses. Keep only the handle if you want moves checked.

``tile.partition(array, tile_shape)`` gives a :class:`Partition`, what a
``tile.Out`` parameter takes. It owns its array like a TileTensor and fixes
the tile shape, which selects the compiled specialization and, with the
array's shape, the launch grid: ``ceil(shape[d] / tile_shape[d])`` tiles
along each axis ``d``, the last axis along grid x (docs/tile.md)::

    zp = tile.partition(z, [128])            # 1000 elements -> 8 tiles (the last one ragged)
    zp.num_tiles                             # (8,)

Partitioning a TileTensor moves it into the partition; a raw CUDA array is
wrapped implicitly. ``zp.into_tensor()`` gives the tensor back unlaunched.

Only this module reads or changes a handle's state; the launch path goes
through :meth:`OwnedHandle.live_array`, :func:`move_all`,
:func:`arrays_of` and :func:`give_back`.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from buildtile.errors import ContractError, MovedError, TypeMismatchError
from buildtile.interop.abi import COMPILED_ORDER
from buildtile.runtime.dtypes import describe_value
from buildtile.runtime.tile.grid import tile_counts

#: guards every move, so two threads cannot both take one handle
_MOVE_LOCK = threading.Lock()


@dataclass(frozen=True)
class MoveSite:
    """Where a handle went; builds the BT0382 message for a later use."""

    into: str                              # "`add` (parameter `x`)", "a partition (tile shape (128,))"
    param: str | None = None               # the parameter it was moved into, if a launch
    help: str = "use the tensors returned by `.sync_on(stream)`"

    @classmethod
    def launch(cls, kernel: str, param: str, params: Sequence[str]) -> MoveSite:
        returned = ", ".join(params) if params else "..."
        return cls(
            f"`{kernel}` (parameter `{param}`)",
            param,
            f"use the tensors returned by `.sync_on(stream)`, in parameter order: "
            f"`{returned} = {kernel}(...).sync_on(stream)`",
        )


class OwnedHandle:
    """What TileTensor and Partition share: one array, owned until moved."""

    __slots__ = ("__weakref__", "_array", "_moved", "_name")
    _kind = "handle"

    def __init__(self, array: object, name: str | None) -> None:
        self._array = array
        self._name = name
        self._moved: MoveSite | None = None

    def live_array(self, use: str) -> object:
        """The array, or MovedError when the handle was moved (``use`` says what was tried)."""
        site = self._moved
        if site is not None:
            raise moved_error(self._label(site), site, use)
        return self._array

    def _label(self, site: MoveSite | None) -> str:
        if self._name:
            return f"`{self._name}`"
        if site is not None and site.param:
            return f"`{site.param}`"
        return f"this {self._kind}"

    def __copy__(self):
        raise TypeError(f"a {self._kind} cannot be copied: it owns its tensor, and moves hand it on")

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __reduce_ex__(self, protocol):
        return self.__copy__()


def moved_error(label: str, site: MoveSite, use: str) -> MovedError:
    return MovedError(f"use of moved value: {label} was moved into {site.into}, so {use} is not allowed",
                      help=site.help)


def move_all(handles: Sequence[tuple[OwnedHandle, MoveSite]], use: str) -> None:
    """Move every handle, or none: if one was moved meanwhile (another thread), raise for it."""
    with _MOVE_LOCK:
        for handle, _ in handles:
            handle.live_array(use)
        for handle, site in handles:
            handle._moved = site
            handle._array = None  # the new owner holds it; a stale handle keeps no memory alive


def is_moved(handle: OwnedHandle) -> bool:
    """Whether ``handle`` was moved (the one question a moved handle still answers)."""
    return handle._moved is not None


def arrays_of(args: tuple) -> tuple:
    """``args`` with each handle replaced by its array (None for a moved one), to pick a stream
    from before the launch is checked."""
    return tuple(a._array if isinstance(a, OwnedHandle) else a for a in args)


def give_back(array: object, handle: OwnedHandle | None) -> TileTensor:
    """The fresh handle a launch returns for ``array``, which ``handle`` (None: a raw array) brought."""
    return TileTensor(array, name=handle._name if handle is not None else None)


def plain_argument(arg: object, is_out: bool) -> tuple | None:
    """``(handle or None, array, tile shape or None)`` for an array argument a launch takes as it
    is: a live Partition with a tile shape and the default schedule for a tile.Out parameter
    (``is_out``), a live TileTensor or a raw array for an input. None for anything else, which the
    launch's general checks accept or refuse."""
    cls = type(arg)
    if cls is Partition:
        if not is_out or arg._moved is not None or arg._tile_shape is None or arg._schedule is not DEFAULT_SCHEDULE:
            return None
        return arg, arg._array, arg._tile_shape
    if cls is TileTensor:
        return None if is_out or arg._moved is not None else (arg, arg._array, None)
    if is_out or isinstance(arg, OwnedHandle):
        return None
    return None, arg, None


def give_back_checked(array: object, handle: OwnedHandle | None) -> TileTensor:
    """:func:`give_back` for an array the launch already read through one of its protocols: the
    check of what an array is holds, so it is not asked again (a protocol property may cost a
    dict per call)."""
    tensor = _TENSOR_NEW(TileTensor)
    tensor._array = array
    tensor._name = handle._name if handle is not None else None
    tensor._moved = None
    return tensor


class TileTensor(OwnedHandle):
    """A handle owning one CUDA array for Tile launches (see the module docstring).

    While it is live it is a transparent stand-in for the array: it exposes
    the wrapped array's ``__cuda_array_interface__`` and ``__dlpack__``, and
    other attributes (``.shape``, ``.dtype``, ...) are the array's.
    ``.array`` is the wrapped object itself.
    """

    __slots__ = ()
    _kind = "TileTensor"

    def __init__(self, array: object, *, name: str | None = None) -> None:
        if isinstance(array, OwnedHandle):
            raise TypeMismatchError(
                f"mismatched types: a TileTensor wraps a CUDA array, got a {type(array).__name__}",
                help="a TileTensor or Partition already owns its array; pass it on as it is",
            )
        _refuse_non_array(array)
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a string, got {name!r}")
        super().__init__(array, name)

    @property
    def array(self) -> object:
        """The wrapped array object (a torch.Tensor, a CuPy array ...)."""
        return self.live_array("reading `.array`")

    @property
    def name(self) -> str | None:
        """The name given at creation, used in messages; None if none was given."""
        self.live_array("reading `.name`")
        return self._name

    @property
    def __cuda_array_interface__(self) -> dict:
        return self.live_array("reading its `__cuda_array_interface__`").__cuda_array_interface__

    def __dlpack__(self, *args, **kwargs):
        return self.live_array("exporting it with `__dlpack__()`").__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.live_array("asking its `__dlpack_device__()`").__dlpack_device__()

    def partition(self, tile_shape=None, **schedule) -> Partition:
        """``tile.partition(self, tile_shape, ...)``: moves this handle into a partition."""
        return partition(self, tile_shape, **schedule)

    def __getattr__(self, name: str):
        # only reached for names the class does not define: those are the array's
        if name in OwnedHandle.__slots__:
            raise AttributeError(name)
        return getattr(self.live_array(f"reading `.{name}`"), name)

    def __repr__(self) -> str:
        if self._moved is not None:
            return f"<TileTensor {self._label(self._moved)} moved into {self._moved.into}>"
        named = f" `{self._name}`" if self._name else ""
        try:
            of_shape = f" of shape {tuple(self._array.shape)}"
        except (AttributeError, TypeError):  # an array known only by its protocols
            of_shape = ""
        return f"<TileTensor{named} over {describe_value(self._array)}{of_shape}>"


#: a TileTensor's allocation, past its checking constructor (give_back_checked)
_TENSOR_NEW = object.__new__


def _refuse_non_array(array: object) -> None:
    """What a TileTensor or a partition may wrap: an object with a CUDA array protocol."""
    if not (hasattr(array, "__cuda_array_interface__") or hasattr(array, "__dlpack__")):
        raise TypeMismatchError(
            f"mismatched types: a TileTensor wraps a CUDA array, got {describe_value(array)}",
            help="pass a PyTorch or CuPy array, a buildtile DeviceArray, or any object with "
                 "__cuda_array_interface__ or __dlpack__",
        )


def tensor(array: object, *, name: str | None = None) -> TileTensor:
    """``tile.tensor(torch_t)``: a :class:`TileTensor` owning ``array`` (a TileTensor stays itself).

    ``name``, when given, is how messages refer to the tensor.
    """
    if isinstance(array, TileTensor):
        array.live_array("wrapping it with `tile.tensor()`")
        if name is None:
            return array
    return TileTensor(array, name=name)


class Partition(OwnedHandle):
    """An array and the shape of the tiles it is cut into (see the module docstring)."""

    __slots__ = ("_schedule", "_shape", "_tile_shape")
    _kind = "Partition"

    def __init__(self, array: object, tile_shape: tuple[int, ...], shape: tuple[int, ...],
                 name: str | None = None, schedule: TileSchedule | None = None) -> None:
        super().__init__(array, name)
        self._tile_shape = tile_shape
        self._shape = shape
        self._schedule = schedule if schedule is not None else DEFAULT_SCHEDULE

    @property
    def schedule(self) -> TileSchedule:
        """The order the tiles are visited in, and whether the launch is persistent."""
        self.live_array("reading `.schedule`")
        return self._schedule

    @property
    def tile_shape(self) -> tuple[int, ...] | None:
        """Extent of one tile along each axis; None: the launch picks a compiled one for the extents."""
        self.live_array("reading `.tile_shape`")
        return self._tile_shape

    @property
    def shape(self) -> tuple[int, ...]:
        """The whole array's shape."""
        self.live_array("reading `.shape`")
        return self._shape

    @property
    def num_tiles(self) -> tuple[int, ...]:
        """Tiles along each axis (a ragged last tile counts)."""
        self.live_array("reading `.num_tiles`")
        if self._tile_shape is None:
            raise ContractError("a partition without a tile shape has its tiles chosen at launch",
                                help="read `tile_shapes` of the pending launch, or partition with a tile shape")
        return tile_counts(self._shape, self._tile_shape)

    @property
    def array(self) -> object:
        """The partitioned array object."""
        return self.live_array("reading `.array`")

    def into_tensor(self) -> TileTensor:
        """Give the tensor back as a TileTensor; this partition is moved."""
        array = self.live_array("taking its tensor with `.into_tensor()`")
        move_all([(self, MoveSite("a TileTensor by `.into_tensor()`", help="use the TileTensor it returned"))],
                 "taking its tensor with `.into_tensor()`")
        return TileTensor(array, name=self._name)

    def __repr__(self) -> str:
        if self._moved is not None:
            return f"<Partition {self._label(self._moved)} moved into {self._moved.into}>"
        named = f" `{self._name}`" if self._name else ""
        order = "" if self._schedule == DEFAULT_SCHEDULE else f" ({self._schedule.describe()})"
        tiles = "tiles chosen at launch" if self._tile_shape is None else f"tiles of {self._tile_shape}"
        return f"<Partition{named} of shape {self._shape} into {tiles}{order}>"


#: the tile orders a partition may ask for
TILE_ORDERS = ("row", "grouped")
#: tile rows a band of the grouped order holds when ``group`` is not given (Triton's GROUP_M)
DEFAULT_GROUP = 8


@dataclass(frozen=True)
class TileSchedule:
    """How a launch visits a partition's tiles (docs/tile.md, "Grids, orders and persistent launch").

    ``order=None``: the order the compiler chose (row order; bands of 8 rows for 2-D
    ``tile.mma`` kernels). ``order="row"``: row-major, the last axis fastest.
    ``order="grouped"``: bands of ``group`` tile rows, each walked column by column (2-D
    partitions, for L2 reuse). ``persistent``: about one wave of blocks, each looping over
    tiles. Every choice is a bijection of the tiles, so ownership is the same.
    """

    order: str | None = None
    group: int = 0            # tile rows per band of the grouped order; 0 otherwise
    persistent: bool = False

    @property
    def word(self) -> int:
        """The kernel's trailing ``tile_schedule`` parameter (interop.abi.TILE_SCHEDULE)."""
        if self.order is None:
            return COMPILED_ORDER
        return self.group if self.order == "grouped" else 1

    def describe(self) -> str:
        parts = [] if self.order is None else [f"order={self.order!r}"]
        parts += [f"group={self.group}"] if self.order == "grouped" else []
        return ", ".join(parts + (["persistent=True"] if self.persistent else []))


#: the schedule of a partition given no options (shared: a TileSchedule is immutable)
DEFAULT_SCHEDULE = TileSchedule()


def partition(array: object, tile_shape=None, *, order: str | None = None, group: int | None = None,
              persistent: bool = False) -> Partition:
    """Cut ``array`` (a TileTensor, which is moved, or any CUDA array) into tiles of ``tile_shape``.

    ``tile_shape`` holds one positive int per axis of the array (an int is
    accepted for 1-D arrays); None leaves the choice to the launch (the
    compiled specialization ranked best for the extents). ``order`` (None: the compiler's choice; "row";
    "grouped", with ``group`` tile rows per band, 8 by default) and
    ``persistent`` choose how a launch visits the tiles (:class:`TileSchedule`). Refusals are BT0600 (the tile
    shape, an option) and BT0308 (not an array); nothing is moved when one is
    raised.
    """
    if isinstance(array, Partition):
        raise ContractError(
            f"cannot partition a partition again (it has tile shape {array.tile_shape})",
            help="take the tensor back with `.into_tensor()` and partition that",
        )
    handle = array if isinstance(array, TileTensor) else None
    raw = handle.live_array("partitioning it") if handle is not None else array
    if handle is None:
        if isinstance(raw, OwnedHandle):
            TileTensor(raw)  # refused with the constructor's words
        _refuse_non_array(raw)
    shape = array_shape(raw)
    tiles = None if tile_shape is None else _tile_shape(tile_shape, shape)
    schedule = _schedule(order, group, persistent, len(shape))
    name = handle._name if handle is not None else None
    if handle is not None:
        move_all([(handle, MoveSite("a partition" + ("" if tiles is None else f" (tile shape {tiles})"),
                                     help="use the partition; a launch gives the tensor back from "
                                          "`.sync_on(stream)`, and `partition.into_tensor()` returns it unlaunched"))],
                 "partitioning it")
    return Partition(raw, tiles, shape, name, schedule)


def _schedule(order, group, persistent, rank: int) -> TileSchedule:
    """The options of ``tile.partition`` as a :class:`TileSchedule`, each bad one refused by name."""
    if order is None and group is None and persistent is False:  # no options: nothing to check
        return DEFAULT_SCHEDULE
    if order is not None and (not isinstance(order, str) or order not in TILE_ORDERS):
        raise ContractError(
            f"unknown tile order: `order` is {order!r}",
            help=f"pass one of {', '.join(repr(o) for o in TILE_ORDERS)} "
                 "(\"grouped\" visits bands of `group` tile rows, for L2 reuse)")
    if group is not None:
        if order != "grouped":
            raise ContractError(f"`group` is an option of the grouped order, but `order` is {order!r}",
                                help="pass `order=\"grouped\", group=...`, or leave `group` out")
        if isinstance(group, bool) or not isinstance(group, int):
            raise ContractError(f"`group` is a number of tile rows, an int, got {describe_value(group)}",
                                help=f"pass a positive int, such as {DEFAULT_GROUP}")
        if group <= 0:
            raise ContractError(f"`group` must be at least 1 (tile rows per band), got {group}",
                                help=f"pass a positive int, such as {DEFAULT_GROUP}")
    if order == "grouped" and rank != 2:
        raise ContractError(f"the grouped order is an order of 2-D tile grids, but the tile shape has {rank} "
                            f"ax{'is' if rank == 1 else 'es'}",
                            help="leave `order` out (row order) for this partition")
    if not isinstance(persistent, bool):
        raise ContractError(f"`persistent` is True or False, got {describe_value(persistent)}")
    if order is None and not persistent:
        return DEFAULT_SCHEDULE
    return TileSchedule(order, (DEFAULT_GROUP if group is None else group) if order == "grouped" else 0, persistent)


def _tile_shape(tile_shape, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``tile_shape`` as a tuple of ints, checked against the array's ``shape``."""
    if type(tile_shape) in (list, tuple) and len(tile_shape) == len(shape):  # the common form, checked in one pass
        for t in tile_shape:
            if type(t) is not int or t < 1:
                break
        else:
            return tuple(tile_shape)
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
    if type(shape) is tuple:  # already plain ints: nothing to convert
        for n in shape:
            if type(n) is not int:
                break
        else:
            return shape
    if shape is None and hasattr(array, "__cuda_array_interface__"):
        shape = array.__cuda_array_interface__.get("shape")
    try:
        return tuple(int(n) for n in shape)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise TypeMismatchError(
            f"mismatched types: cannot read the shape of the {type(array).__qualname__} to partition",
            help="partition an array with a `.shape`, such as a PyTorch or CuPy array",
        ) from None
