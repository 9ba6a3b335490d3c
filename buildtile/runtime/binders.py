"""The generated binders of a :class:`~buildtile.runtime.signature.KernelSignature`.

Binding runs on every launch, so the signature generates straight-line
Python functions for it (as ``dataclasses`` and ``attrs`` generate their
methods), one per combination of argument types met, guarded by a test of
those types (a binder returns None when handed other types, and the
caller asks the signature for the right one):

- when every array argument's type has an
  :class:`~buildtile.runtime.arrays.InlineReader` (PyTorch tensors, buildtile
  DeviceArrays), the *fast binder* (:func:`generate_fast_binder`) reads each
  argument's pointer, device and extents straight into locals, and tests
  aliasing and ``requires`` over those locals. Those tests depend on nothing
  but the values passed to the kernel, so a binder remembers the last values
  that passed and skips them when a launch repeats the arguments. Anything
  it cannot vouch for goes to the slow binder;
- otherwise, and for every refusal, the *slow binder* (:func:`generate_binder`)
  builds an :class:`~buildtile.runtime.arrays.ArrayView` per array argument
  and runs every check with the view at hand.

A binder does no dict lookup and no string work for arguments it accepts;
everything that builds a message is a method of the signature called only
on refusal. What a generator reads of the signature is :class:`BinderSource`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from buildtile.interop.abi import SLICE_KINDS
from buildtile.interop.manifest import ParamRecord
from buildtile.runtime.arrays import (
    HOST,
    InlineReader,
    byte_range,
    extractor_for,
    overlaps_itself,
)
from buildtile.runtime.dtypes import ScalarRefused, scalar_converter
from buildtile.runtime.record_arrays import record_reader
from buildtile.runtime.requires import SOURCE_NAMES, Requirement, combined_check, rename_leaves


class BinderSource(Protocol):
    """What a binder is generated from (a :class:`~buildtile.runtime.signature.KernelSignature`)."""

    name: str
    params: tuple[ParamRecord, ...]
    alias_pairs: tuple[tuple[ParamRecord, ParamRecord], ...]
    requirements: tuple[Requirement, ...]
    bind_values: Callable

    def refuse_count(self, args: tuple) -> None: ...
    def refuse_producer(self, index: int, arg: object, exc: Exception) -> None: ...
    def refuse_array(self, index: int, arg: object, view) -> None: ...
    def refuse_scalar(self, index: int, arg: object, exc: ScalarRefused) -> None: ...
    def refuse_aliasing(self, i: int, j: int, env: tuple) -> None: ...
    def refuse_devices(self, env: tuple) -> None: ...
    def refuse_requirement(self, failed: int, env: tuple) -> None: ...


def generate_binder(sig: BinderSource, types: tuple[type, ...] | None = None) -> tuple[str, Callable]:
    """Write and compile the slow binder of ``sig``: ``(args, stream) -> (values, device, env, waits)``.

    With ``types`` (the types of the array arguments, in order) the binder is
    specialised to them: it returns None for other types, and each
    argument's extractor is chosen now instead of looked up per launch.
    """
    namespace: dict = {
        "extractor_for": extractor_for,
        "HOST": HOST,
        "ScalarRefused": ScalarRefused,
        "wrong_count": sig.refuse_count,
        "producer_failed": sig.refuse_producer,
        "refuse_array": sig.refuse_array,
        "refuse_scalar": sig.refuse_scalar,
        "refuse_aliasing": sig.refuse_aliasing,
        "refuse_devices": sig.refuse_devices,
        "refuse_requirement": sig.refuse_requirement,
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
            namespace[f"X{k}"] = extractor_for(cls)
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
        itemsize = p.itemsize
        if types:
            emit(f"    x = X{k}")
        else:
            emit(f"    x = extractor_for(type(a{k}))")
        emit("    try:")
        emit(f"        v{k} = x(a{k}, stream) if x is not None else None")
        emit("    except Exception as exc:")
        emit(f"        producer_failed({k}, a{k}, exc)")
        if p.record is not None:   # the array's bytes (or structured elements) read as records
            namespace[f"R{k}"] = record_reader(p)
            emit(f"    w{k} = R{k}(v{k})")
            emit(f"    if w{k} is None:")
            emit(f"        refuse_array({k}, a{k}, v{k})")
            emit(f"    v{k} = w{k}")
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


def generate_fast_binder(sig: BinderSource, types: tuple[type, ...],
                          readers: Sequence[InlineReader]) -> tuple[str, Callable] | None:
    """Write and compile the fast binder of ``sig`` for array arguments of ``types``, read
    by ``readers``; None when a reader has no code for its parameter.

    Same result as the slow binder, with ``env == ()`` (no views are made), for
    arguments it accepts; everything else is handed to the slow binder
    (``SLOW``), which accepts it or raises the refusal with its explanation. Arrays of records
    are always read as views (record_arrays.py): a kernel that takes one has no fast binder.
    """
    if any(p.record is not None for p in sig.params):
        return None
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
        k, size = p.index, p.itemsize
        if size > 1 and not batch:  # a batch reader checks the alignment where it reads the pointer
            checks += [f"if p{k} & {size - 1}:  # misaligned for its element type", "    return SLOW(args, stream)"]
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
