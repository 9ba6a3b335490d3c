"""Owned tensor handles for Tile launches, and what using one after a move does.

A Tile launch takes ownership of its arguments (DESIGN §4, BT0382): the
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
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from buildtile.errors import MovedError, TypeMismatchError
from buildtile.runtime.dtypes import describe_value

if TYPE_CHECKING:
    from buildtile.runtime.tile_partition import Partition

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

    def _live(self, use: str) -> object:
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
            handle._live(use)
        for handle, site in handles:
            handle._moved = site
            handle._array = None  # the new owner holds it; a stale handle keeps no memory alive


def is_moved(handle: OwnedHandle) -> bool:
    """Whether ``handle`` was moved (the one question a moved handle still answers)."""
    return handle._moved is not None


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
        if not (hasattr(array, "__cuda_array_interface__") or hasattr(array, "__dlpack__")):
            raise TypeMismatchError(
                f"mismatched types: a TileTensor wraps a CUDA array, got {describe_value(array)}",
                help="pass a PyTorch or CuPy array, a buildtile DeviceArray, or any object with "
                     "__cuda_array_interface__ or __dlpack__",
            )
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a string, got {name!r}")
        super().__init__(array, name)

    @property
    def array(self) -> object:
        """The wrapped array object (a torch.Tensor, a CuPy array ...)."""
        return self._live("reading `.array`")

    @property
    def name(self) -> str | None:
        """The name given at creation, used in messages; None if none was given."""
        self._live("reading `.name`")
        return self._name

    @property
    def __cuda_array_interface__(self) -> dict:
        return self._live("reading its `__cuda_array_interface__`").__cuda_array_interface__

    def __dlpack__(self, *args, **kwargs):
        return self._live("exporting it with `__dlpack__()`").__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._live("asking its `__dlpack_device__()`").__dlpack_device__()

    def partition(self, tile_shape) -> Partition:
        """``tile.partition(self, tile_shape)``: moves this handle into a partition."""
        from buildtile.runtime.tile_partition import partition

        return partition(self, tile_shape)

    def __getattr__(self, name: str):
        # only reached for names the class does not define: those are the array's
        if name in OwnedHandle.__slots__:
            raise AttributeError(name)
        return getattr(self._live(f"reading `.{name}`"), name)

    def __repr__(self) -> str:
        if self._moved is not None:
            return f"<TileTensor {self._label(self._moved)} moved into {self._moved.into}>"
        named = f" `{self._name}`" if self._name else ""
        try:
            of_shape = f" of shape {tuple(self._array.shape)}"
        except (AttributeError, TypeError):  # an array known only by its protocols
            of_shape = ""
        return f"<TileTensor{named} over {describe_value(self._array)}{of_shape}>"


def tensor(array: object, *, name: str | None = None) -> TileTensor:
    """``tile.tensor(torch_t)``: a :class:`TileTensor` owning ``array`` (a TileTensor stays itself).

    ``name``, when given, is how messages refer to the tensor.
    """
    if isinstance(array, TileTensor):
        array._live("wrapping it with `tile.tensor()`")
        if name is None:
            return array
    return TileTensor(array, name=name)
