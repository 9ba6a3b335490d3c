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

Binding runs on every launch, so the signature generates straight-line
Python functions for it (as ``dataclasses`` and ``attrs`` generate their
methods), one per combination of argument types met, guarded by a test of
those types (:meth:`KernelSignature.binder_for`; a binder returns None when
handed other types, and the caller asks for the right one):

- when every array argument's type has an
  :class:`~buildtile.runtime.arrays.InlineReader` (PyTorch tensors, buildtile
  DeviceArrays), the *fast binder* reads each argument's pointer, device
  and extents straight into locals, and tests aliasing and ``requires``
  over those locals. Those tests depend on nothing but the values passed
  to the kernel, so a binder remembers the last values that passed and
  skips them when a launch repeats the arguments. Anything it cannot vouch
  for goes to the slow binder;
- otherwise, and for every refusal, the *slow binder* builds an
  :class:`~buildtile.runtime.arrays.ArrayView` per array argument and runs
  every check with the view at hand.

Everything that builds a message is an ordinary function called only on
refusal. ``signature.bind_source`` holds the text of the slow binder,
``signature.binder_sources`` that of each specialised one.
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
from buildtile.interop.abi import PARAM_KINDS, SLICE_KINDS, kernel_params, spell_type
from buildtile.runtime.arrays import (
    _EXTRACTORS,
    DEVICE,
    HOST,
    ArrayView,
    InlineReader,
    byte_range,
    choose_extractor,
    inline_reader,
    overlaps_itself,
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
    SOURCE_NAMES,
    Requirement,
    RequirementEvalError,
    combined_check,
    compile_requirement,
    rename_leaves,
)

#: ``binder(args, stream) -> (values, device, env, waits)``, or None for argument types it was not made for
Binder = Callable[[tuple, int], "tuple | None"]

#: specialised binders a signature keeps before starting over
_MAX_BINDERS = 32


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
        return spell_type(self.kind, self.dtype, self.rank)


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
        #: positions of the array parameters, whose argument types pick a binder
        self._array_positions = tuple(p.index for p in self.params if p.is_array)
        self._binders: dict[tuple[type, ...], Binder] = {}
        #: generated text of each specialised binder, by the array arguments' types
        self.binder_sources: dict[tuple[type, ...], str] = {}
        #: the binder :meth:`binder_for` returned last: where a new prepared launch starts
        self.hot_binder: Binder = _no_binder_yet

    def binder_for(self, args: tuple) -> Binder:
        """The binder made for the types of ``args`` (generated on first sight of them).

        Raises the usual refusal when the number of arguments is wrong.
        """
        if len(args) != len(self.params):
            self._wrong_count(args)
        types = tuple(type(args[k]) for k in self._array_positions)
        binder = self._binders.get(types)
        if binder is None:
            readers = [inline_reader(cls) for cls in types]
            made = None
            if None not in readers:
                made = _generate_fast_binder(self, types, readers)
            if made is None:
                made = _generate_binder(self, types)
            if len(self._binders) >= _MAX_BINDERS:
                self._binders.clear()
                self.binder_sources.clear()
            self.binder_sources[types], binder = made
            self._binders[types] = binder
        self.hot_binder = binder
        return binder

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

def _no_binder_yet(args: tuple, stream: int) -> None:
    """The binder of a signature that has bound nothing yet: sends the caller to binder_for()."""


def _generate_binder(sig: KernelSignature, types: tuple[type, ...] | None = None) -> tuple[str, Callable]:
    """Write and compile the slow binder of ``sig``: ``(args, stream) -> (values, device, env, waits)``.

    With ``types`` (the types of the array arguments, in order) the binder is
    specialised to them: it returns None for other types, and each
    argument's extractor is chosen now instead of looked up per launch.
    """
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
    out = [f"def bind(args, stream):  # kernel `{sig.name}`" + (f" for {_type_names(types)}" if types else "")]
    emit = out.append
    emit(f"    if len(args) != {n}:")
    emit("        return None" if types is not None else "        wrong_count(args)")
    if n:
        emit(f"    {', '.join(f'a{k}' for k in range(n))}, = args")
    if types:
        positions = [p.index for p in sig.params if p.is_array]
        for k, cls in zip(positions, types):
            namespace[f"C{k}"] = cls
            namespace[f"X{k}"] = _EXTRACTORS[cls] if cls in _EXTRACTORS else choose_extractor(cls)
        emit(f"    if {' or '.join(f'type(a{k}) is not C{k}' for k in positions)}:")
        emit("        return None")
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
        if types:
            emit(f"    x = X{k}")
        else:
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


def _type_names(types: tuple[type, ...]) -> str:
    return ", ".join(f"{cls.__module__}.{cls.__qualname__}" for cls in types)


_FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")


def _generate_fast_binder(sig: KernelSignature, types: tuple[type, ...],
                          readers: Sequence[InlineReader]) -> tuple[str, Callable] | None:
    """Write and compile the fast binder of ``sig`` for array arguments of ``types``, read
    by ``readers``; None when a reader has no code for its parameter.

    Same result as the slow binder, with ``env == ()`` (no views are made), for
    arguments it accepts; everything else is handed to the slow binder
    (``SLOW``), which accepts it or raises the refusal with its explanation.
    """
    namespace: dict = {
        "SLOW": sig.bind_values,
        "ScalarRefused": ScalarRefused,
        "RANGE": byte_range,
        "OVERLAPS": overlaps_itself,
        "LAST": [None],   # the last values whose checks passed
        "SEEN": [(None, None)],  # batch readers: (what was read, the result) of the last launch that passed
        **SOURCE_NAMES,
    }
    n = len(sig.params)
    body: list[str] = []

    def emit(line: str, depth: int = 1) -> None:
        body.append("    " * depth + line)

    emit(f"if len(args) != {n}:")
    emit("return None", 2)
    if n:
        emit(f"{', '.join(f'a{k}' for k in range(n))}, = args")
    arrays = [p for p in sig.params if p.is_array]
    batch = None
    # a launch that repeats what a batch reader read last time returns last time's result at once
    # (without scalars, what the reader reads is all the launch depends on)
    shortcut = len(arrays) == n
    if arrays and all(reader is readers[0] for reader in readers) and all(cls is types[0] for cls in types):
        batch = readers[0].batch_code(arrays, types[0], namespace, shortcut)  # reads (and type-checks) them all
    if batch:
        if shortcut:
            emit("seen = SEEN[0]")
        for line in batch:
            emit(line)
    elif arrays:
        for p, cls in zip(arrays, types):
            namespace[f"C{p.index}"] = cls
        emit(f"if {' or '.join(f'type(a{p.index}) is not C{p.index}' for p in arrays)}:")
        emit("return None", 2)
    values: list[str] = []
    checked: list[str] = []   # the values the checks below depend on (float scalars do not count)
    for p in sig.params:
        k = p.index
        emit(f"# {p.name}: {p.type_text}")
        if not p.is_array:
            namespace[f"convert{k}"] = scalar_converter(p.dtype)
            emit("try:")
            emit(f"v{k} = convert{k}(a{k})", 2)
            emit("except ScalarRefused:")
            emit("return SLOW(args, stream)", 2)
            values.append(f"v{k}")
            if p.dtype not in _FLOAT_DTYPES:
                checked.append(f"v{k}")
            continue
        reader = readers[arrays.index(p)]
        if p.kind in SLICE_KINDS:
            lines = [] if batch else reader.slice_code(k, p.dtype, namespace)
            entries = [f"p{k}", f"n{k}"]
        else:
            lines = [] if batch else reader.tensor_code(k, p.dtype, p.rank, namespace)
            entries = [f"p{k}"] + [f"s{k}[{axis}]" for axis in range(p.rank)] \
                + [f"t{k}[{axis}]" for axis in range(p.rank)]
        if lines is None:
            return None
        for line in lines:
            emit(line)
        values += entries
        checked += entries
    if len(arrays) > 1 and not batch:  # a batch reader checks that the devices agree
        first = arrays[0].index
        emit(f"if {' or '.join(f'd{p.index} != d{first}' for p in arrays[1:])}:")
        emit("return SLOW(args, stream)", 2)
    emit(f"values = ({''.join(v + ', ' for v in values)})")

    # the checks: each depends only on the values passed to the kernel
    checks: list[str] = []
    aliased = {p.index for pair in sig.alias_pairs for p in pair}
    for p in arrays:
        k, size = p.index, ITEMSIZE[p.dtype]
        if p.kind in SLICE_KINDS:
            checks += [f"if n{k}:", f"    if not p{k}:", "        return SLOW(args, stream)"]
            if k in aliased:
                checks += [f"    lo{k}, hi{k} = p{k}, p{k} + n{k} * {size}", "else:", f"    lo{k} = hi{k} = 0"]
        else:
            checks += [f"lo{k}, hi{k} = RANGE(p{k}, s{k}, t{k}, {size})",
                       f"if lo{k} == hi{k}:", f"    lo{k} = hi{k} = 0",
                       f"elif not p{k}:", "    return SLOW(args, stream)"]
            if p.kind == "disjoint_tensor":
                checks += [f"if OVERLAPS(s{k}, t{k}):", "    return SLOW(args, stream)"]
    for a, b in sig.alias_pairs:
        i, j = a.index, b.index
        checks += [f"if lo{i} < hi{j} and lo{j} < hi{i}:  # {a.name} / {b.name}", "    return SLOW(args, stream)"]
    if sig.requirements:
        def local(k: int, axis: int | None) -> str:
            if axis is None:
                return f"v{k}"
            return f"n{k}" if sig.params[k].kind in SLICE_KINDS else f"s{k}[{axis}]"

        checks.append("try:")
        for requirement in sig.requirements:
            checks += [f"    if not {rename_leaves(requirement.source, local)}:  # {requirement.text}",
                       "        return SLOW(args, stream)"]
        checks += ["except ArithmeticError:", "    return SLOW(args, stream)"]
    device = ("d" if batch else f"d{arrays[0].index}") if arrays else "None"
    if batch and shortcut:
        for line in checks:
            emit(line)
        emit(f"result = values, {device}, (), ()")
        emit("SEEN[0] = (read, result)")
        emit("return result")
        device = None
    elif sig.alias_pairs or sig.requirements:
        # worth remembering: a launch that repeats its arguments skips the checks, and gets
        # the very tuple it packed last time back (so the launch need not pack it again)
        if checked == values:
            emit("if values != LAST[0]:")
        else:
            emit(f"key = ({''.join(v + ', ' for v in checked)})")
            emit("if key != LAST[0]:")
        for line in checks:
            emit(line, 2)
        emit(f"LAST[0] = {'values' if checked == values else 'key'}", 2)
        if checked == values:
            emit(f"return values, {device}, (), ()", 2)
            emit(f"return LAST[0], {device}, (), ()")
            device = None
    else:
        for line in checks:
            emit(line)
    if device is not None:
        emit(f"return values, {device}, (), ()")
    source = (f"def bind(args, stream):  # kernel `{sig.name}`, fast, for {_type_names(types) or 'no arrays'}\n"
              + "\n".join(body) + "\n")
    exec(compile(source, f"<buildtile fast binder of {sig.name}>", "exec"), namespace)
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
