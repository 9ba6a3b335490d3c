"""Checking a Tile launch's arguments, before anything is moved or queued.

:func:`bind` takes what the caller passed — :class:`~buildtile.runtime.
tile.handles.TileTensor`\\ s and :class:`~buildtile.runtime.tile.handles.
Partition`\\ s, raw CUDA arrays, scalars — and either refuses it with a
BT-coded error or returns a :class:`TileBinding`: the chosen
specialization, the launch grid and the flat kernel parameters. The checks,
in order:

1. the argument count, and no moved handle (BT0382);
2. a Partition exactly for each ``tile.Out`` parameter (BT0308);
3. no tensor passed twice (BT0502): a launch takes ownership of each;
4. each array: a GPU array of the parameter's dtype and rank, row-major
   contiguous (Tile kernels may assume it), writable when it is an output,
   all on one device (BT0308);
5. no output overlapping any other argument (BT0502);
6. the partitions' tile shapes are a compiled specialization (BT0600);
7. the contract's ``requires`` relations (BT0600);
8. some launch grid CUDA allows covers the tiles (BT0600; grid.py).

The wording is the SIMT runtime's (:mod:`buildtile.runtime.refusals`).
Nothing here calls the driver except :func:`settle_device`, which asks it
about pointers whose producer named no device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from buildtile.errors import AliasingError, ContractError
from buildtile.interop.manifest import ParamRecord, SpecializationRecord
from buildtile.runtime import refusals
from buildtile.runtime.arrays import ArrayView, array_view
from buildtile.runtime.contract import MAX_GRID, Dim3
from buildtile.runtime.dtypes import ScalarRefused, describe_value, scalar_converter
from buildtile.runtime.tile.grid import launch_grid, persistent_grid, tile_counts
from buildtile.runtime.tile.handles import DEFAULT_SCHEDULE, OwnedHandle, Partition, TileSchedule, TileTensor
from buildtile.runtime.tile.signature import TileSignature


@dataclass
class TileBinding:
    """A launch's arguments after every check."""

    specialization: SpecializationRecord
    grid: Dim3                        # a 0 in it: an empty output, nothing to launch
    values: tuple                     # flat kernel parameters (ABI v1), ready to pack
    args: tuple                       # per parameter: the array object, or the scalar as given
    handles: tuple                    # per parameter: the handle passed (moved on launch), or None
    views: tuple                      # per parameter: its ArrayView (keeps DLPack capsules alive), or None
    device: int | None                # set by settle_device; None while unknown
    stream: int                       # the stream DLPack producers were asked to make data ready on
    persistent: bool = False          # the grid is one wave of blocks (set_persistent_grid)
    #: every array was read through a CUDA array protocol (arrays.quick_view), so each is known to
    #: be what a TileTensor wraps
    quick: bool = False


def set_persistent_grid(sig: TileSignature, binding: TileBinding, sms: int, threads: int, shared_bytes: int) -> None:
    """A persistent launch's grid, once the device's SM count and the entry launched (its block's
    ``threads`` and ``shared_bytes``) are known (grid.persistent_grid)."""
    if not binding.persistent or 0 in binding.grid:
        return
    spec = binding.specialization
    counts = tile_counts(tuple(binding.views[sig.grid_param.index].shape), spec.tile_shape_of(sig.grid_param.name))
    binding.grid = persistent_grid(counts, sms, threads, shared_bytes)


def bind(sig: TileSignature, args: tuple, stream: int) -> TileBinding:
    """Check ``args`` for a launch of ``sig``; raise the first refusal (see the module docstring)."""
    if len(args) != len(sig.params):
        raise refusals.wrong_count(sig.name, sig.params, len(args))
    unwrapped = [_unwrap(sig, p, arg) for p, arg in zip(sig.params, args)]
    handles = tuple(handle for handle, _ in unwrapped)
    objects = tuple(obj for _, obj in unwrapped)
    _refuse_repeats(sig, handles, objects)

    made: dict[int, ArrayView] = {}
    group, params = ((), sig.params) if not sig.generic_params else _dtype_group(sig, objects, stream, made)
    views: list[ArrayView | None] = []
    env: list[object] = []
    for p, obj in zip(params, objects):
        if p.is_array:
            view = _view(sig, p, obj, stream, made.get(p.index))
            views.append(view)
            env.append(view)
        else:
            views.append(None)
            env.append(obj)
    _refuse_known_device_mismatch(sig, views)
    _refuse_overlaps(sig, views)

    spec = sig.specialization_for({p.name: handles[p.index].tile_shape for p in sig.outs}, group,
                                  tuple(views[sig.grid_param.index].shape))
    schedule = _schedule(sig, handles)
    _check_requires(sig, env)
    grid = _grid(sig, spec, views[sig.grid_param.index])

    values: list = []
    for p, value in zip(sig.params, env):
        if p.is_array:
            values.append(value.ptr)
            values += value.shape
            values += value.strides
        else:
            values.append(value)
    if sig.takes_schedule:
        values.append(schedule.word)
    returned = tuple(objects[k] if p.is_array else args[k] for k, p in enumerate(sig.params))
    return TileBinding(spec, grid, tuple(values), returned, handles, tuple(views), None, stream,
                       schedule.persistent)


def settle_device(sig: TileSignature, binding: TileBinding,
                  resolve: Callable[[int], tuple[str, int | None]]) -> int | None:
    """The arguments' device, asking ``resolve(ptr) -> (memory, ordinal)`` (the driver) only about
    pointers whose producer did not say (an empty array's pointer may point nowhere: it is not
    asked about). None: no array says."""
    arrays = [(p, view) for p, view in zip(sig.params, binding.views)
              if view is not None and not (view.device is None and view.lo == view.hi)]
    binding.device = refusals.settle_device(sig.name, arrays, resolve)
    return binding.device


# ----------------------------------------------------------------------------- the checks

def _unwrap(sig: TileSignature, p: ParamRecord, arg: object) -> tuple[OwnedHandle | None, object]:
    """(the handle passed or None, the array or converted scalar), refusing moved handles and
    partitions where none belong."""
    handle = arg if isinstance(arg, OwnedHandle) else None
    obj = handle.live_array(f"passing it to `{sig.name}` (parameter `{p.name}`)") if handle is not None else arg
    if not p.is_array:
        if handle is not None:
            raise _mismatch(sig, p, f"a {type(handle).__name__}")
        try:
            return None, scalar_converter(p.dtype)(arg)
        except ScalarRefused as exc:
            raise _mismatch(sig, p, describe_value(arg), str(exc)) from None
    if isinstance(handle, Partition) and not p.is_tile_out:
        raise _mismatch(sig, p, f"a partition (tile shape {handle.tile_shape})",
                        help="pass the tensor itself (`partition.into_tensor()` gives it back): "
                             "only tile.Out parameters are partitioned")
    if p.is_tile_out and not isinstance(handle, Partition):
        got = "a TileTensor" if isinstance(handle, TileTensor) else describe_value(arg)
        example = ", ".join(dict.fromkeys(str(list(spec.tile_shape_of(p.name))) for spec in sig.specializations))
        raise _mismatch(sig, p, got, "an output must be partitioned into tiles",
                        help=f"partition it: `tile.partition({p.name}, tile_shape)` with a compiled tile "
                             f"shape ({example})")
    return handle, obj


def _refuse_repeats(sig: TileSignature, handles: tuple, objects: tuple) -> None:
    """One handle, or one array object, passed for two parameters (each launch owns its arguments)."""
    seen: dict[int, tuple[ParamRecord, str]] = {}
    for p in sig.params:
        if not p.is_array:
            continue
        handle = handles[p.index]
        keys = [(id(objects[p.index]), "array")]
        if handle is not None:
            keys.insert(0, (id(handle), type(handle).__name__))
        for key, what in keys:
            if key not in seen:
                seen[key] = (p, what)
                continue
            first = seen[key][0]
            writer, other = (p, first) if p.writes and not first.writes else (first, p)
            if writer.writes:
                raise AliasingError(
                    f"{_borrow_head(writer, other)}: kernel `{sig.name}` writes `{writer.name}`, and the same "
                    f"{what} is passed as `{first.name}` and as `{p.name}`",
                    help=f"pass a separate buffer for `{writer.name}`")
            raise AliasingError(
                f"cannot move the same {what} into `{sig.name}` twice: it is passed as `{first.name}` "
                f"and as `{p.name}`",
                help="a Tile launch takes ownership of each argument; pass separate tensors "
                     "(copy one if both must hold the same data)")


def _dtype_group(sig: TileSignature, objects: tuple, stream: int,
                 made: dict[int, ArrayView]) -> tuple[tuple, tuple[ParamRecord, ...]]:
    """A generic kernel's compiled dtype binding for the arrays passed, and its parameters with
    those dtypes (BT0308 listing the compiled ones when there is none). The views made on the
    way are kept in ``made``; an argument that is no array is left to the checks that follow."""
    dtypes = {}
    for p in sig.params:
        if p.name in sig.generic_params:
            try:
                view = made[p.index] = array_view(objects[p.index], stream)
            except Exception:  # noqa: BLE001 (reported, in the producer's words, by _view)
                continue
            if view is not None and view.dtype is not None:
                dtypes[p.name] = view.dtype
    return sig.dtype_group_for(dtypes)


def _view(sig: TileSignature, p: ParamRecord, obj: object, stream: int, view: ArrayView | None = None) -> ArrayView:
    try:
        if view is None:
            view = array_view(obj, stream)
    except Exception as exc:  # noqa: BLE001 (whatever the producer raised, in its words)
        raise refusals.producer_failed(sig.name, p, obj, exc) from None
    error = refusals.array_problem(sig.name, p, obj, view, p.writes)
    if error is not None:
        raise error
    if p.is_tile_out and not view.is_contiguous():   # inputs are read through their strides
        raise _mismatch(sig, p, view.describe(),
                        f"not contiguous: strides {tuple(view.strides)} in elements; tile kernels take "
                        "row-major contiguous tensors",
                        help=refusals.PASS_CONTIGUOUS)
    lo, hi = view.byte_range()
    if lo == hi:
        lo = hi = 0
    elif not view.ptr:
        raise refusals.null_pointer(sig.name, p, view)
    view.lo, view.hi = lo, hi
    return view


def _refuse_known_device_mismatch(sig: TileSignature, views: list) -> None:
    error = refusals.first_device_mismatch(sig.name, [(p, v) for p, v in zip(sig.params, views) if v is not None])
    if error is not None:
        raise error


def _refuse_overlaps(sig: TileSignature, views: list) -> None:
    arrays = [p for p in sig.params if p.is_array]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            if not (a.writes or b.writes):
                continue
            va, vb = views[a.index], views[b.index]
            if va.lo < vb.hi and vb.lo < va.hi:
                writer, other = (a, b) if a.writes else (b, a)
                vw, vo = views[writer.index], views[other.index]
                raise AliasingError(
                    f"{_borrow_head(writer, other)}: kernel `{sig.name}` writes `{writer.name}`, and "
                    f"`{writer.name}` (bytes {vw.lo:#x}..{vw.hi:#x}) overlaps `{other.name}` "
                    f"(bytes {vo.lo:#x}..{vo.hi:#x})",
                    help=f"pass a separate buffer for `{writer.name}`")


def _check_requires(sig: TileSignature, env: list) -> None:
    if sig.check_requires is None:
        return
    failed = sig.check_requires(env)
    if failed >= 0:
        raise refusals.requirement_violated(sig.name, sig.requirements[failed], env)


def _schedule(sig: TileSignature, handles: tuple) -> TileSchedule:
    """The grid output's tile schedule. Another output's partition cannot choose one (the grid
    output's tiles fix the order), nor can a kernel built before kernels took one."""
    for p in sig.outs:
        schedule = handles[p.index].schedule
        if schedule == DEFAULT_SCHEDULE:
            continue
        if p is not sig.grid_param:
            raise ContractError(
                f"launch contract violated: kernel `{sig.name}` visits the tiles of `{sig.grid_param.name}`, so "
                f"the partition of `{p.name}` cannot choose their order ({schedule.describe()})",
                help=f"give `order` and `persistent` to the partition of `{sig.grid_param.name}`")
        if not sig.takes_schedule:
            raise ContractError(
                f"launch contract violated: kernel `{sig.name}` visits its tiles in the order it was compiled "
                f"with, but the partition of `{p.name}` asks for {schedule.describe()}",
                help=f"rebuild the kernel's package with this buildtile, or partition `{p.name}` without "
                     "`order`, `group` and `persistent`")
    return handles[sig.grid_param.index].schedule


def _grid(sig: TileSignature, spec: SpecializationRecord, view: ArrayView) -> Dim3:
    """The launch grid over the tiles of the grid parameter (grid.py's rule); BT0600 when no grid
    CUDA allows holds them."""
    p = sig.grid_param
    shape, tiles = tuple(view.shape), spec.tile_shape_of(p.name)
    counts = tile_counts(shape, tiles)
    grid = launch_grid(counts)
    if grid is None:
        if len(counts) == 1:
            why, limit = f"{counts[0]} tiles along axis 0 of `{p.name}`", f"{MAX_GRID[0]} blocks along x"
        else:
            why, limit = f"{' x '.join(map(str, counts))} tiles of `{p.name}`", " x ".join(map(str, MAX_GRID)) + " blocks"
        raise ContractError(
            f"launch contract violated: kernel `{sig.name}` needs {why} (shape {shape}, tile shape {tiles}), "
            f"but CUDA runs at most {limit}",
            help="partition the output into larger tiles (a compiled specialization)")
    return grid


# ----------------------------------------------------------------------------- messages

def _mismatch(sig: TileSignature, p: ParamRecord, got: str, why: str = "", help: str | None = None):
    return refusals.mismatch(sig.name, p, got, why, help)


def _borrow_head(writer: ParamRecord, other: ParamRecord) -> str:
    return refusals.borrow_head(writer, other, other.writes)
