"""A kernel's signature, compiled once from its manifest record, and argument binding.

:class:`KernelSignature` is everything the launch path needs to know about a
kernel that does not depend on the device: its parameters, how they flatten
into the PTX entry's parameters (kernel ABI v1), its launch contract, its
``requires`` relations and which parameter pairs must not alias.

Binding checks a call's arguments against it — count, dtype, rank, layout,
memory space, read-only outputs, aliasing, ``requires`` — and produces the
flat values to pack. It never calls the CUDA driver: the device of an
argument that only the driver can tell (a plain ``__cuda_array_interface__``
has no device id) is settled afterwards by :meth:`KernelSignature.
settle_device`. Every refusal is a typed :class:`~buildtile.errors.
LaunchError` naming the kernel and the parameter.

Binding runs on every launch, so the signature generates one straight-line
Python function for it (as ``dataclasses`` and ``attrs`` generate their
methods): per parameter a few attribute reads and compares, the aliasing
and ``requires`` tests inlined over local variables, no loops and no dict
lookups beyond one per argument type. Everything that builds a message is
an ordinary function called only on refusal. ``signature.bind_source``
holds the generated text.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from buildtile.errors import (
    AliasingError,
    BuildtileError,
    ContractError,
    TypeMismatchError,
)
from buildtile.interop.abi import PARAM_KINDS, kernel_params
from buildtile.runtime.arrays import (
    _EXTRACTORS,
    DEVICE,
    HOST,
    ArrayView,
    choose_extractor,
)
from buildtile.runtime.contract import LaunchContract
from buildtile.runtime.dtypes import (
    ITEMSIZE,
    STRUCT_CODES,
    ScalarRefused,
    describe_value,
    display_name,
    scalar_converter,
)
from buildtile.runtime.requires import (
    Requirement,
    RequirementEvalError,
    combined_check,
    compile_requirement,
)

SLICE_KINDS = ("slice", "disjoint_slice", "atomic_slice")
TENSOR_KINDS = ("tensor", "disjoint_tensor")
_TYPE_NAMES = {
    "slice": "Slice",
    "disjoint_slice": "DisjointSlice",
    "atomic_slice": "AtomicSlice",
    "tensor": "Tensor",
    "disjoint_tensor": "DisjointTensor",
}


@dataclass(frozen=True)
class ParamSpec:
    """One declared kernel parameter."""

    index: int
    name: str
    kind: str
    dtype: str
    rank: int
    role: str  # "in", "out" or "inout"

    @property
    def is_array(self) -> bool:
        return self.kind != "scalar"

    @property
    def writes(self) -> bool:
        """Whether the kernel may write it (what the aliasing rule protects)."""
        return self.role in ("out", "inout")

    @property
    def type_text(self) -> str:
        """How the parameter's type was written in the kernel: ``DisjointSlice[f32]``."""
        if self.kind == "scalar":
            return self.dtype
        if self.kind in TENSOR_KINDS:
            return f"{_TYPE_NAMES[self.kind]}[{self.dtype}, {self.rank}]"
        return f"{_TYPE_NAMES[self.kind]}[{self.dtype}]"


class ParamLayout:
    """Where each flattened PTX parameter lives in one packed argument buffer.

    Each value sits at its natural alignment, so the buffer can be filled by
    a single ``struct.pack_into`` and ``kernelParams[i]`` points into it.
    """

    def __init__(self, flat_ctypes: Sequence[str]) -> None:
        fmt = ["<"]
        offsets = []
        offset = 0
        for ctype in flat_ctypes:
            code = STRUCT_CODES[ctype]
            size = struct.calcsize("<" + code)
            pad = -offset % size
            if pad:
                fmt.append(f"{pad}x")
                offset += pad
            offsets.append(offset)
            fmt.append(code)
            offset += size
        self.struct = struct.Struct("".join(fmt))
        self.offsets: tuple[int, ...] = tuple(offsets)
        self.size = max(offset, 1)


@dataclass
class BoundArguments:
    """A call's arguments after every driver-free check."""

    values: tuple              # flat, in PTX parameter order, ready to pack
    device: int | None         # the arrays' device; None until settled (see settle_device)
    env: tuple                 # per parameter: its ArrayView, or the converted scalar
    waits: tuple[int, ...]     # producer streams to wait on (CUDA array interface v3)


class KernelSignature:
    """The device-independent description of one compiled kernel."""

    def __init__(self, record: dict, where: str) -> None:
        self.name: str = record["name"]
        self.module: str = record["module"]
        self.symbol: str = record["symbol"]
        self.kind: str = record.get("kind", "simt")
        self.where = where
        self.params: tuple[ParamSpec, ...] = tuple(
            _param_spec(k, p, where) for k, p in enumerate(record.get("params", []))
        )
        self.contract = LaunchContract.from_record(record.get("contract"), where)
        requires = (record.get("contract") or {}).get("requires") or []
        self.requirements: tuple[Requirement, ...] = tuple(
            compile_requirement(entry, record.get("params", []), where) for entry in requires
        )
        self.layout = ParamLayout([p.ctype for p in kernel_params(record.get("params", []))])
        arrays = [p for p in self.params if p.is_array]
        #: parameter pairs that must not overlap: every pair in which one side is written
        self.alias_pairs: tuple[tuple[ParamSpec, ParamSpec], ...] = tuple(
            (a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:] if a.writes or b.writes
        )
        self.bind_source, self.bind_values = _generate_binder(self)

    def describe_params(self) -> str:
        return ", ".join(f"{p.name}: {p.type_text}" for p in self.params)

    def bind(self, args: Sequence[object], stream: int = 0) -> BoundArguments:
        """Check ``args`` against the signature; raise the first refusal. Never calls the driver.

        The launch path calls :attr:`bind_values` directly, which returns the
        same four fields as a tuple.
        """
        return BoundArguments(*self.bind_values(tuple(args), stream))

    def settle_device(self, env: tuple, resolve: Callable[[int], tuple[str, int | None]]) -> int | None:
        """The device of the arrays in ``env``, asking ``resolve(ptr) -> (memory, ordinal)``
        (the driver) about pointers whose producer did not say. None: no array arguments."""
        device: int | None = None
        first: ParamSpec | None = None
        for spec, value in zip(self.params, env):
            if not spec.is_array:
                continue
            if value.device is None:
                memory, ordinal = resolve(value.ptr)
                if memory != DEVICE or ordinal is None:
                    where = "in host memory" if memory == HOST else "not in CUDA device memory"
                    raise TypeMismatchError(
                        f"mismatched types: parameter `{spec.name}` of kernel `{self.name}` expects "
                        f"{spec.type_text} in GPU memory, but the pointer of the "
                        f"{display_name(value.dtype)} {value.origin} passed is {where}",
                        help="copy the data to the GPU first",
                    )
                value.device, value.memory = ordinal, DEVICE
            if device is None:
                device, first = value.device, spec
            elif value.device != device:
                raise _device_mismatch(self.name, first, device, spec, value.device)
        return device

    # -- refusals (called from the generated binder) ----------------------------------

    def _wrong_count(self, args: tuple) -> None:
        count = len(self.params)
        raise TypeMismatchError(
            f"mismatched types: kernel `{self.name}` takes {count} argument{'' if count == 1 else 's'} "
            f"({self.describe_params()}), got {len(args)}",
        )

    def _producer_failed(self, index: int, arg: object, exc: Exception) -> None:
        why = str(exc) if isinstance(exc, ValueError) else f"reading it failed: {type(exc).__name__}: {exc}"
        raise _mismatch(self.name, self.params[index], describe_value(arg), why) from None

    def _refuse_array(self, index: int, arg: object, view: ArrayView | None) -> None:
        raise _array_refusal(self.name, self.params[index], arg, view)

    def _refuse_scalar(self, index: int, arg: object, exc: ScalarRefused) -> None:
        raise _mismatch(self.name, self.params[index], describe_value(arg), str(exc)) from None

    def _refuse_aliasing(self, i: int, j: int, env: tuple) -> None:
        raise _aliasing_error(self.name, self.params[i], env[i], self.params[j], env[j])

    def _refuse_devices(self, env: tuple) -> None:
        """Called when the known devices of ``env`` differ; names the first two that do."""
        first = None
        for spec, value in zip(self.params, env):
            if spec.is_array and value.device is not None:
                if first is None:
                    first = (spec, value.device)
                elif value.device != first[1]:
                    raise _device_mismatch(self.name, first[0], first[1], spec, value.device)

    def _refuse_requirement(self, failed: int, env: tuple) -> None:
        requirement = self.requirements[failed]
        try:
            reason = "" if not requirement.holds(env) else " (it held when evaluated again)"
        except RequirementEvalError as exc:
            reason = f" ({exc})"
        raise ContractError(
            f"launch contract violated: kernel `{self.name}` requires `{requirement.text}` "
            f"but {requirement.explain(env)}{reason}",
            help="pass arguments whose sizes satisfy the kernel's `requires`",
        )


# ----------------------------------------------------------------------------- generation

def _generate_binder(sig: KernelSignature) -> tuple[str, Callable]:
    """Write and compile the binder of ``sig``: ``(args, stream) -> (values, device, env, waits)``."""
    namespace: dict = {
        "EXTRACTORS": _EXTRACTORS,
        "choose_extractor": choose_extractor,
        "HOST": HOST,
        "ScalarRefused": ScalarRefused,
        "wrong_count": sig._wrong_count,
        "producer_failed": sig._producer_failed,
        "refuse_array": sig._refuse_array,
        "refuse_scalar": sig._refuse_scalar,
        "refuse_aliasing": sig._refuse_aliasing,
        "refuse_devices": sig._refuse_devices,
        "refuse_requirement": sig._refuse_requirement,
        "check_requires": combined_check(sig.requirements),
    }
    n = len(sig.params)
    out = [f"def bind(args, stream):  # kernel `{sig.name}`"]
    emit = out.append
    emit(f"    if len(args) != {n}:")
    emit("        wrong_count(args)")
    if n:
        emit(f"    {', '.join(f'a{k}' for k in range(n))}, = args")
    emit("    waits = ()")
    values: list[str] = []
    arrays: list[int] = []
    for p in sig.params:
        k = p.index
        emit(f"    # {p.name}: {p.type_text}")
        if not p.is_array:
            namespace[f"convert{k}"] = scalar_converter(p.dtype)
            emit("    try:")
            emit(f"        v{k} = convert{k}(a{k})")
            emit("    except ScalarRefused as exc:")
            emit(f"        refuse_scalar({k}, a{k}, exc)")
            values.append(f"v{k}")
            continue
        arrays.append(k)
        itemsize = ITEMSIZE[p.dtype]
        emit("    try:")
        emit(f"        x = EXTRACTORS[type(a{k})]")
        emit("    except KeyError:")
        emit(f"        x = choose_extractor(type(a{k}))")
        emit("    try:")
        emit(f"        v{k} = x(a{k}, stream) if x is not None else None")
        emit("    except Exception as exc:")
        emit(f"        producer_failed({k}, a{k}, exc)")
        refused = [f"v{k} is None", f"v{k}.memory is HOST", f"v{k}.dtype != {p.dtype!r}",
                   f"len(v{k}.shape) != {p.rank}", f"v{k}.problem is not None"]
        if p.writes:
            refused.append(f"v{k}.read_only")
        emit(f"    if {' or '.join(refused)}:")
        emit(f"        refuse_array({k}, a{k}, v{k})")
        emit(f"    p{k} = v{k}.ptr")
        if p.kind in SLICE_KINDS:
            emit(f"    n{k} = v{k}.shape[0]")
            emit(f"    if n{k} > 1 and v{k}.strides[0] != 1:")
            emit(f"        refuse_array({k}, a{k}, v{k})")
            emit(f"    if n{k}:")
            emit(f"        if not p{k}:")
            emit(f"            refuse_array({k}, a{k}, v{k})")
            emit(f"        lo{k}, hi{k} = p{k}, p{k} + n{k} * {itemsize}")
            emit("    else:")
            emit(f"        lo{k} = hi{k} = 0")
            values += [f"p{k}", f"n{k}"]
        else:
            if p.kind == "disjoint_tensor":
                emit(f"    if v{k}.overlaps_itself():")
                emit(f"        refuse_array({k}, a{k}, v{k})")
            emit(f"    lo{k}, hi{k} = v{k}.byte_range()")
            emit(f"    if lo{k} == hi{k}:")
            emit(f"        lo{k} = hi{k} = 0")
            emit(f"    elif not p{k}:")
            emit(f"        refuse_array({k}, a{k}, v{k})")
            emit(f"    s{k} = v{k}.shape")
            emit(f"    t{k} = v{k}.strides")
            values.append(f"p{k}")
            values += [f"s{k}[{axis}]" for axis in range(p.rank)]
            values += [f"t{k}[{axis}]" for axis in range(p.rank)]
        emit(f"    if v{k}.stream is not None and v{k}.stream != stream:")
        emit(f"        waits += (v{k}.stream,)")
    env = "(" + "".join(f"v{k}, " for k in range(n)) + ")"
    emit(f"    env = {env}")
    for a, b in sig.alias_pairs:
        i, j = a.index, b.index
        emit(f"    if lo{i} < hi{j} and lo{j} < hi{i}:  # {a.name} / {b.name}")
        emit(f"        refuse_aliasing({i}, {j}, env)")
    if sig.requirements:
        emit("    failed = check_requires(env)")
        emit("    if failed >= 0:")
        emit("        refuse_requirement(failed, env)")
    if arrays:
        first, rest = arrays[0], arrays[1:]
        emit(f"    device = v{first}.device")
        if rest:
            differs = " or ".join(f"v{k}.device != device" for k in rest)
            emit(f"    if {differs}:")
            known = " or ".join(f"v{k}.device is None" for k in arrays)
            emit(f"        if {known}:")
            emit("            device = None  # settled with the driver's help")
            emit("        else:")
            emit("            refuse_devices(env)")
    else:
        emit("    device = None")
    emit(f"    return ({''.join(v + ', ' for v in values)}), device, env, waits")
    source = "\n".join(out) + "\n"
    exec(compile(source, f"<buildtile binder of {sig.name}>", "exec"), namespace)
    return source, namespace["bind"]


# ----------------------------------------------------------------------------- messages

def _param_spec(index: int, record: dict, where: str) -> ParamSpec:
    try:
        name, kind = record["name"], record["kind"]
        dtype = record["dtype"]
    except KeyError as exc:
        raise BuildtileError(f"{where}: a parameter record lacks {exc}", code="BT0621") from None
    if not isinstance(name, str) or not name.isidentifier():
        raise BuildtileError(f"{where}: parameter name {name!r} is not an identifier", code="BT0621")
    if kind not in PARAM_KINDS:
        raise BuildtileError(
            f"{where}: parameter `{name}` has kind {kind!r}, which this runtime cannot pass",
            code="BT0621",
            help="upgrade buildtile to the version the package was built with",
        )
    if dtype not in ITEMSIZE:
        raise BuildtileError(f"{where}: parameter `{name}` has unknown dtype {dtype!r}", code="BT0621")
    rank = record.get("rank", 0 if kind == "scalar" else 1)
    if kind in SLICE_KINDS:
        rank = 1
    elif kind == "scalar":
        rank = 0
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank <= 8:
        raise BuildtileError(f"{where}: parameter `{name}` has invalid rank {rank!r}", code="BT0621")
    role = record.get("role") or PARAM_KINDS[kind]
    return ParamSpec(index, name, kind, dtype, rank, role)


def _mismatch(kernel: str, spec: ParamSpec, got: str, why: str = "", help: str | None = None) -> TypeMismatchError:
    text = f"mismatched types: parameter `{spec.name}` of kernel `{kernel}` expects {spec.type_text}, got {got}"
    if why:
        text += f" ({why})"
    return TypeMismatchError(text, help=help)


def _array_refusal(kernel: str, spec: ParamSpec, arg: object, view: ArrayView | None) -> TypeMismatchError:
    """Why ``view`` cannot be passed as ``spec`` (the checks of the binder, in order, with words)."""
    if view is None:
        return _mismatch(kernel, spec, describe_value(arg), "not a GPU array",
                         help="pass a CUDA array: a PyTorch or CuPy array, a buildtile DeviceArray, "
                              "or any object with __cuda_array_interface__ or __dlpack__")
    if view.memory == HOST:
        return _mismatch(kernel, spec, view.describe(), "the kernel reads GPU memory",
                         help="copy the data to the GPU first")
    if view.dtype != spec.dtype or len(view.shape) != spec.rank:
        return _mismatch(kernel, spec, view.describe())
    if view.problem:
        return _mismatch(kernel, spec, view.describe(), view.problem)
    if spec.writes and view.read_only:
        return _mismatch(kernel, spec, view.describe(), "it is read-only, and the kernel writes it")
    if spec.kind in SLICE_KINDS and view.shape[0] > 1 and view.strides[0] != 1:
        return _mismatch(kernel, spec, view.describe(), f"not contiguous: stride {view.strides[0]} elements",
                         help="pass a contiguous copy (e.g. `.contiguous()` / `ascontiguousarray`)")
    if spec.kind == "disjoint_tensor" and view.overlaps_itself():
        return _mismatch(kernel, spec, view.describe(),
                         f"strides {tuple(view.strides)} make different indices write the same element")
    return _mismatch(kernel, spec, view.describe(), "its data pointer is null")


def _device_mismatch(kernel: str, a: ParamSpec, device_a: int, b: ParamSpec, device_b: int) -> TypeMismatchError:
    return TypeMismatchError(
        f"mismatched types: arguments of kernel `{kernel}` are on different devices: "
        f"`{a.name}` is on cuda:{device_a}, `{b.name}` is on cuda:{device_b}",
        help="move every argument to one device before the launch",
    )


def _aliasing_error(kernel, a: ParamSpec, va: ArrayView, b: ParamSpec, vb: ArrayView) -> AliasingError:
    writer, other = (a, b) if a.writes else (b, a)
    vw, vo = (va, vb) if writer is a else (vb, va)
    if vw.obj is vo.obj:
        how = f"the same {vw.origin} is passed as `{writer.name}` and as `{other.name}`"
    else:
        lo_w, hi_w = vw.byte_range()
        lo_o, hi_o = vo.byte_range()
        how = (f"`{writer.name}` (bytes {lo_w:#x}..{hi_w:#x}) overlaps `{other.name}` "
               f"(bytes {lo_o:#x}..{hi_o:#x})")
    if other.writes:
        head = f"cannot borrow `{writer.name}` as mutable more than once"
    else:
        head = f"cannot borrow `{writer.name}` as mutable because it is also borrowed as immutable (as `{other.name}`)"
    return AliasingError(
        f"{head}: kernel `{kernel}` writes `{writer.name}`, and {how}",
        help=f"pass a separate buffer for `{writer.name}`",
    )
