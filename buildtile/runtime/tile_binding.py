"""Checking a Tile launch's arguments, before anything is moved or queued.

:func:`bind` takes what the caller passed — :class:`~buildtile.runtime.
tile_tensor.TileTensor`\\ s and :class:`~buildtile.runtime.tile_partition.
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
8. the tile grid fits CUDA's limits (BT0600).

The wording follows the SIMT runtime's (:mod:`buildtile.runtime.signature`).
Nothing here calls the driver except :func:`settle_device`, which asks it
about pointers whose producer named no device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from buildtile.errors import AliasingError, ContractError, TypeMismatchError
from buildtile.runtime.arrays import DEVICE, HOST, ArrayView, array_view
from buildtile.runtime.contract import MAX_GRID, Dim3
from buildtile.runtime.dtypes import (
    ScalarRefused,
    describe_value,
    display_name,
    scalar_converter,
)
from buildtile.runtime.requires import RequirementEvalError
from buildtile.runtime.tile_partition import Partition, tile_grid
from buildtile.runtime.tile_signature import (
    TileParam,
    TileSignature,
    TileSpecialization,
)
from buildtile.runtime.tile_tensor import OwnedHandle, TileTensor


@dataclass
class TileBinding:
    """A launch's arguments after every check."""

    specialization: TileSpecialization
    grid: Dim3                        # a 0 in it: an empty output, nothing to launch
    values: tuple                     # flat kernel parameters (ABI v1), ready to pack
    args: tuple                       # per parameter: the array object, or the scalar as given
    handles: tuple                    # per parameter: the handle passed (moved on launch), or None
    views: tuple                      # per parameter: its ArrayView (keeps DLPack capsules alive), or None
    device: int | None                # set by settle_device; None while unknown
    stream: int                       # the stream DLPack producers were asked to make data ready on


def bind(sig: TileSignature, args: tuple, stream: int) -> TileBinding:
    """Check ``args`` for a launch of ``sig``; raise the first refusal (see the module docstring)."""
    if len(args) != len(sig.params):
        count = len(sig.params)
        raise TypeMismatchError(
            f"mismatched types: kernel `{sig.name}` takes {count} argument{'' if count == 1 else 's'} "
            f"({sig.describe_params()}), got {len(args)}")
    unwrapped = [_unwrap(sig, p, arg) for p, arg in zip(sig.params, args)]
    handles = tuple(handle for handle, _ in unwrapped)
    objects = tuple(obj for _, obj in unwrapped)
    _refuse_repeats(sig, handles, objects)

    views: list[ArrayView | None] = []
    env: list[object] = []
    for p, obj in zip(sig.params, objects):
        if p.is_array:
            view = _view(sig, p, obj, stream)
            views.append(view)
            env.append(view)
        else:
            views.append(None)
            env.append(obj)
    _refuse_known_device_mismatch(sig, views)
    _refuse_overlaps(sig, views)

    spec = sig.specialization_for({p.name: handles[p.index]._tile_shape for p in sig.outs})
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
    returned = tuple(objects[k] if p.is_array else args[k] for k, p in enumerate(sig.params))
    return TileBinding(spec, grid, tuple(values), returned, handles, tuple(views), None, stream)


def settle_device(sig: TileSignature, binding: TileBinding,
                  resolve: Callable[[int], tuple[str, int | None]]) -> int | None:
    """The arguments' device, asking ``resolve(ptr) -> (memory, ordinal)`` (the driver) only about
    pointers whose producer did not say (an empty array's pointer may point nowhere: it is not
    asked about). None: no array says."""
    device: int | None = None
    first: TileParam | None = None
    for p, view in zip(sig.params, binding.views):
        if view is None or (view.device is None and view.lo == view.hi):
            continue
        if view.device is None:
            memory, ordinal = resolve(view.ptr)
            if memory != DEVICE or ordinal is None:
                where = "in host memory" if memory == HOST else "not in CUDA device memory"
                raise TypeMismatchError(
                    f"mismatched types: parameter `{p.name}` of kernel `{sig.name}` expects {p.type_text} in "
                    f"GPU memory, but the pointer of the {display_name(view.dtype)} {view.origin} passed is {where}",
                    help="copy the data to the GPU first",
                )
            view.device, view.memory = ordinal, DEVICE
        if device is None:
            device, first = view.device, p
        elif view.device != device:
            raise _device_mismatch(sig, first, device, p, view.device)
    binding.device = device
    return device


# ----------------------------------------------------------------------------- the checks

def _unwrap(sig: TileSignature, p: TileParam, arg: object) -> tuple[OwnedHandle | None, object]:
    """(the handle passed or None, the array or converted scalar), refusing moved handles and
    partitions where none belong."""
    handle = arg if isinstance(arg, OwnedHandle) else None
    obj = handle._live(f"passing it to `{sig.name}` (parameter `{p.name}`)") if handle is not None else arg
    if not p.is_array:
        if handle is not None:
            raise _mismatch(sig, p, f"a {type(handle).__name__}")
        try:
            return None, scalar_converter(p.dtype)(arg)
        except ScalarRefused as exc:
            raise _mismatch(sig, p, describe_value(arg), str(exc)) from None
    if isinstance(handle, Partition) and not p.is_out:
        raise _mismatch(sig, p, f"a partition (tile shape {handle._tile_shape})",
                        help="pass the tensor itself (`partition.into_tensor()` gives it back): "
                             "only tile.Out parameters are partitioned")
    if p.is_out and not isinstance(handle, Partition):
        got = "a TileTensor" if isinstance(handle, TileTensor) else describe_value(arg)
        example = ", ".join(str(list(spec.tile_shape_of(p.name))) for spec in sig.specializations)
        raise _mismatch(sig, p, got, "an output must be partitioned into tiles",
                        help=f"partition it: `tile.partition({p.name}, tile_shape)` with a compiled tile "
                             f"shape ({example})")
    return handle, obj


def _refuse_repeats(sig: TileSignature, handles: tuple, objects: tuple) -> None:
    """One handle, or one array object, passed for two parameters (each launch owns its arguments)."""
    seen: dict[int, tuple[TileParam, str]] = {}
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
            writer, other = (p, first) if p.is_out and not first.is_out else (first, p)
            if writer.is_out:
                raise AliasingError(
                    f"{_borrow_head(writer, other)}: kernel `{sig.name}` writes `{writer.name}`, and the same "
                    f"{what} is passed as `{first.name}` and as `{p.name}`",
                    help=f"pass a separate buffer for `{writer.name}`")
            raise AliasingError(
                f"cannot move the same {what} into `{sig.name}` twice: it is passed as `{first.name}` "
                f"and as `{p.name}`",
                help="a Tile launch takes ownership of each argument; pass separate tensors "
                     "(copy one if both must hold the same data)")


def _view(sig: TileSignature, p: TileParam, obj: object, stream: int) -> ArrayView:
    try:
        view = array_view(obj, stream)
    except Exception as exc:  # noqa: BLE001 (whatever the producer raised, in its words)
        why = str(exc) if isinstance(exc, ValueError) else f"reading it failed: {type(exc).__name__}: {exc}"
        raise _mismatch(sig, p, describe_value(obj), why) from None
    if view is None:
        raise _mismatch(sig, p, describe_value(obj), "not a GPU array",
                        help="pass a CUDA array: a PyTorch or CuPy array, a buildtile DeviceArray, "
                             "or any object with __cuda_array_interface__ or __dlpack__")
    if view.memory == HOST:
        raise _mismatch(sig, p, view.describe(), "the kernel reads GPU memory", help="copy the data to the GPU first")
    if view.dtype != p.dtype or len(view.shape) != p.rank:
        raise _mismatch(sig, p, view.describe())
    if view.problem:
        raise _mismatch(sig, p, view.describe(), view.problem)
    if p.is_out and view.read_only:
        raise _mismatch(sig, p, view.describe(), "it is read-only, and the kernel writes it")
    if p.is_out and not view.is_contiguous():   # inputs are read through their strides
        raise _mismatch(sig, p, view.describe(),
                        f"not contiguous: strides {tuple(view.strides)} in elements; tile kernels take "
                        "row-major contiguous tensors",
                        help="pass a contiguous copy (e.g. `.contiguous()` / `ascontiguousarray`)")
    lo, hi = view.byte_range()
    if lo == hi:
        lo = hi = 0
    elif not view.ptr:
        raise _mismatch(sig, p, view.describe(), "its data pointer is null")
    view.lo, view.hi = lo, hi
    return view


def _refuse_known_device_mismatch(sig: TileSignature, views: list) -> None:
    first: tuple[TileParam, int] | None = None
    for p, view in zip(sig.params, views):
        if view is None or view.device is None:
            continue
        if first is None:
            first = (p, view.device)
        elif view.device != first[1]:
            raise _device_mismatch(sig, first[0], first[1], p, view.device)


def _refuse_overlaps(sig: TileSignature, views: list) -> None:
    arrays = [p for p in sig.params if p.is_array]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            if not (a.is_out or b.is_out):
                continue
            va, vb = views[a.index], views[b.index]
            if va.lo < vb.hi and vb.lo < va.hi:
                writer, other = (a, b) if a.is_out else (b, a)
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
    if failed < 0:
        return
    requirement = sig.requirements[failed]
    try:
        reason = "" if not requirement.holds(env) else " (it held when evaluated again)"
    except RequirementEvalError as exc:
        reason = f" ({exc})"
    raise ContractError(
        f"launch contract violated: kernel `{sig.name}` requires `{requirement.text}` "
        f"but {requirement.explain(env)}{reason}",
        help="pass arguments whose sizes satisfy the kernel's `requires`",
    )


def _grid(sig: TileSignature, spec: TileSpecialization, view: ArrayView) -> Dim3:
    """One block per tile of the grid parameter; refused past CUDA's grid limits."""
    p = sig.grid_param
    shape, tiles = tuple(view.shape), spec.tile_shape_of(p.name)
    grid = tile_grid(shape, tiles)
    for axis, (n, limit) in enumerate(zip(grid, MAX_GRID)):
        if n > limit:
            raise ContractError(
                f"launch contract violated: kernel `{sig.name}` needs {n} tiles along axis "
                f"{p.rank - 1 - axis} of `{p.name}` (shape {shape}, tile shape {tiles}), but CUDA allows at "
                f"most {limit} blocks along {'xyz'[axis]}",
                help="partition the output into larger tiles (a compiled specialization)")
    return grid


# ----------------------------------------------------------------------------- messages

def _mismatch(sig: TileSignature, p: TileParam, got: str, why: str = "", help: str | None = None) -> TypeMismatchError:
    text = f"mismatched types: parameter `{p.name}` of kernel `{sig.name}` expects {p.type_text}, got {got}"
    if why:
        text += f" ({why})"
    return TypeMismatchError(text, help=help)


def _device_mismatch(sig: TileSignature, a: TileParam, device_a: int, b: TileParam, device_b: int):
    return TypeMismatchError(
        f"mismatched types: arguments of kernel `{sig.name}` are on different devices: "
        f"`{a.name}` is on cuda:{device_a}, `{b.name}` is on cuda:{device_b}",
        help="move every argument to one device before the launch",
    )


def _borrow_head(writer: TileParam, other: TileParam) -> str:
    if other.is_out:
        return f"cannot borrow `{writer.name}` as mutable more than once"
    return f"cannot borrow `{writer.name}` as mutable because it is also borrowed as immutable (as `{other.name}`)"
