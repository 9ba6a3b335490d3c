"""The words of a refused launch, shared by SIMT and Tile kernels.

Both runtimes check the same things about an argument (a GPU array of the
parameter's dtype and rank, writable when the kernel writes it, on the
arguments' one device, overlapping no other argument the kernel writes, the
``requires`` relations) and word each refusal alike: every function here
builds the typed error of one refusal and is called only when one is due.
:func:`settle_device` asks the driver about the arrays whose producer named
no device.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from buildtile.errors import ContractError, TypeMismatchError
from buildtile.interop.manifest import ParamRecord
from buildtile.runtime.arrays import DEVICE, HOST, ArrayView
from buildtile.runtime.dtypes import describe_value, display_name
from buildtile.runtime.requires import Requirement, RequirementEvalError

#: what to pass instead of something that is not a GPU array
PASS_A_CUDA_ARRAY = ("pass a CUDA array: a PyTorch or CuPy array, a buildtile DeviceArray, "
                     "or any object with __cuda_array_interface__ or __dlpack__")
#: what to pass instead of a strided array where a contiguous one is needed
PASS_CONTIGUOUS = "pass a contiguous copy (e.g. `.contiguous()` / `ascontiguousarray`)"


def mismatch(kernel: str, param: ParamRecord, got: str, why: str = "",
             help: str | None = None) -> TypeMismatchError:
    """``parameter `x` of kernel `k` expects <type>, got <got> (<why>)``."""
    text = f"mismatched types: parameter `{param.name}` of kernel `{kernel}` expects {param.type_text}, got {got}"
    if why:
        text += f" ({why})"
    return TypeMismatchError(text, help=help)


def wrong_count(kernel: str, params: tuple[ParamRecord, ...], got: int) -> TypeMismatchError:
    count = len(params)
    described = ", ".join(f"{p.name}: {p.type_text}" for p in params)
    return TypeMismatchError(
        f"mismatched types: kernel `{kernel}` takes {count} argument{'' if count == 1 else 's'} "
        f"({described}), got {got}",
    )


def producer_failed(kernel: str, param: ParamRecord, arg: object, exc: Exception) -> TypeMismatchError:
    """Reading ``arg`` as an array raised ``exc`` (a ValueError is the producer's own words)."""
    why = str(exc) if isinstance(exc, ValueError) else f"reading it failed: {type(exc).__name__}: {exc}"
    return mismatch(kernel, param, describe_value(arg), why)


def array_problem(kernel: str, param: ParamRecord, arg: object, view: ArrayView | None,
                  writes: bool) -> TypeMismatchError | None:
    """Why ``view`` (of ``arg``) cannot be passed as ``param`` whatever the kernel's kind: not a
    GPU array, another dtype or rank, a layout its producer could not describe, read-only
    where the kernel writes (``writes``). None when none of these holds."""
    if view is None:
        return mismatch(kernel, param, describe_value(arg), "not a GPU array", help=PASS_A_CUDA_ARRAY)
    if view.memory == HOST:
        return mismatch(kernel, param, view.describe(), "the kernel reads GPU memory",
                        help="copy the data to the GPU first")
    if view.dtype != param.dtype or len(view.shape) != param.rank:
        return mismatch(kernel, param, view.describe())
    if view.problem:
        return mismatch(kernel, param, view.describe(), view.problem)
    if writes and view.read_only:
        return mismatch(kernel, param, view.describe(), "it is read-only, and the kernel writes it")
    return None


def null_pointer(kernel: str, param: ParamRecord, view: ArrayView) -> TypeMismatchError:
    return mismatch(kernel, param, view.describe(), "its data pointer is null")


def device_mismatch(kernel: str, a: ParamRecord, device_a: int, b: ParamRecord, device_b: int) -> TypeMismatchError:
    return TypeMismatchError(
        f"mismatched types: arguments of kernel `{kernel}` are on different devices: "
        f"`{a.name}` is on cuda:{device_a}, `{b.name}` is on cuda:{device_b}",
        help="move every argument to one device before the launch",
    )


def first_device_mismatch(kernel: str, arrays: Iterable[tuple[ParamRecord, ArrayView]]) -> TypeMismatchError | None:
    """The refusal for the first two arrays whose known devices differ; None when all agree."""
    first: tuple[ParamRecord, int] | None = None
    for param, view in arrays:
        if view.device is None:
            continue
        if first is None:
            first = (param, view.device)
        elif view.device != first[1]:
            return device_mismatch(kernel, first[0], first[1], param, view.device)
    return None


def settle_device(kernel: str, arrays: Iterable[tuple[ParamRecord, ArrayView]],
                  resolve: Callable[[int], tuple[str, int | None]]) -> int | None:
    """The device of ``arrays``, asking ``resolve(ptr) -> (memory, ordinal)`` (the driver) about
    pointers whose producer did not say, and recording its answer in their views. None: no arrays."""
    device: int | None = None
    first: ParamRecord | None = None
    for param, view in arrays:
        if view.device is None:
            memory, ordinal = resolve(view.ptr)
            if memory != DEVICE or ordinal is None:
                where = "in host memory" if memory == HOST else "not in CUDA device memory"
                raise TypeMismatchError(
                    f"mismatched types: parameter `{param.name}` of kernel `{kernel}` expects "
                    f"{param.type_text} in GPU memory, but the pointer of the "
                    f"{display_name(view.dtype)} {view.origin} passed is {where}",
                    help="copy the data to the GPU first",
                )
            view.device, view.memory = ordinal, DEVICE
        if device is None:
            device, first = view.device, param
        elif view.device != device:
            raise device_mismatch(kernel, first, device, param, view.device)  # type: ignore[arg-type]
    return device


def borrow_head(writer: ParamRecord, other: ParamRecord, other_writes: bool) -> str:
    """The first words of an aliasing refusal, as the borrow rules say them."""
    if other_writes:
        return f"cannot borrow `{writer.name}` as mutable more than once"
    return f"cannot borrow `{writer.name}` as mutable because it is also borrowed as immutable (as `{other.name}`)"


def requirement_violated(kernel: str, requirement: Requirement, env) -> ContractError:
    """``requirement`` failed over ``env``; the message gives the values it read."""
    try:
        reason = "" if not requirement.holds(env) else " (it held when evaluated again)"
    except RequirementEvalError as exc:
        reason = f" ({exc})"
    return ContractError(
        f"launch contract violated: kernel `{kernel}` requires `{requirement.text}` "
        f"but {requirement.explain(env)}{reason}",
        help="pass arguments whose sizes satisfy the kernel's `requires`",
    )
