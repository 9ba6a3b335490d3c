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

The binders are generated Python functions, one per combination of
argument types met (:mod:`buildtile.runtime.binders`);
:meth:`KernelSignature.binder_for` makes and keeps them.
``signature.bind_source`` holds the text of the slow binder,
``signature.binder_sources`` that of each specialised one. The ``refuse_*``
methods are what the binders call to raise a refusal.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from buildtile.errors import AliasingError, TypeMismatchError
from buildtile.interop.abi import SLICE_KINDS, PtxParam, kernel_params
from buildtile.interop.manifest import KernelRecord, ParamRecord
from buildtile.runtime import refusals
from buildtile.runtime.arrays import HOST, ArrayView, inline_reader
from buildtile.runtime.binders import generate_binder, generate_fast_binder
from buildtile.runtime.contract import LaunchContract
from buildtile.runtime.dtypes import STRUCT_CODES, ScalarRefused, describe_value
from buildtile.runtime.record_arrays import as_records, record_help
from buildtile.runtime.requires import Requirement, compile_requirement

#: ``binder(args, stream) -> (values, device, env, waits)``, or None for argument types it was not made for
Binder = Callable[[tuple, int], "tuple | None"]

#: specialised binders a signature keeps before starting over
_MAX_BINDERS = 32


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

    @classmethod
    def of(cls, record: KernelRecord, trailing: Sequence[PtxParam] = ()) -> ParamLayout:
        """The layout of ``record``'s PTX entry, then ``trailing`` (every specialization of a Tile
        kernel shares it)."""
        return cls([p.ctype for p in [*kernel_params(record.param_dicts()), *trailing]])


def compile_requirements(record: KernelRecord) -> tuple[Requirement, ...]:
    """``record``'s ``requires`` relations, compiled against its parameters."""
    params = record.param_dicts()
    return tuple(compile_requirement(r.as_dict(), params, record.where) for r in record.contract.requires)


@dataclass
class BoundArguments:
    """A call's arguments after every driver-free check."""

    values: tuple              # flat, in PTX parameter order, ready to pack
    device: int | None         # the arrays' device; None until settled (see settle_device)
    env: tuple                 # per parameter: its ArrayView, or the converted scalar
    waits: tuple[int, ...]     # producer streams to wait on (CUDA array interface v3)


def _no_binder_yet(args: tuple, stream: int) -> None:
    """The binder of a signature that has bound nothing yet: sends the caller to binder_for()."""


class KernelSignature:
    """The device-independent description of one compiled SIMT kernel."""

    def __init__(self, record: KernelRecord) -> None:
        self.name: str = record.name
        self.module: str = record.module
        self.symbol: str = record.symbol
        self.kind: str = record.kind
        self.where = record.where
        self.params: tuple[ParamRecord, ...] = record.params
        self.contract = LaunchContract.from_manifest(record.contract)
        self.requirements: tuple[Requirement, ...] = compile_requirements(record)
        self.layout = ParamLayout.of(record)
        arrays = [p for p in self.params if p.is_array]
        #: parameter pairs that must not overlap: every pair in which one side is written
        self.alias_pairs: tuple[tuple[ParamRecord, ParamRecord], ...] = tuple(
            (a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:] if a.writes or b.writes
        )
        self.bind_source, self.bind_values = generate_binder(self)
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
            self.refuse_count(args)
        types = tuple(type(args[k]) for k in self._array_positions)
        binder = self._binders.get(types)
        if binder is None:
            readers = [inline_reader(cls) for cls in types]
            made = None
            if None not in readers:
                made = generate_fast_binder(self, types, readers)
            if made is None:
                made = generate_binder(self, types)
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
        arrays = [(p, view) for p, view in zip(self.params, env) if p.is_array]
        return refusals.settle_device(self.name, arrays, resolve)

    # -- refusals (called from the generated binders) ---------------------------------

    def refuse_count(self, args: tuple) -> None:
        raise refusals.wrong_count(self.name, self.params, len(args))

    def refuse_producer(self, index: int, arg: object, exc: Exception) -> None:
        raise refusals.producer_failed(self.name, self.params[index], arg, exc) from None

    def refuse_array(self, index: int, arg: object, view: ArrayView | None) -> None:
        raise _array_refusal(self.name, self.params[index], arg, view)

    def refuse_scalar(self, index: int, arg: object, exc: ScalarRefused) -> None:
        raise refusals.mismatch(self.name, self.params[index], describe_value(arg), str(exc)) from None

    def refuse_aliasing(self, i: int, j: int, env: tuple) -> None:
        raise _aliasing_error(self.name, self.params[i], env[i], self.params[j], env[j])

    def refuse_devices(self, env: tuple) -> None:
        """Called when the known devices of ``env`` differ; names the first two that do."""
        arrays = [(p, view) for p, view in zip(self.params, env) if p.is_array]
        error = refusals.first_device_mismatch(self.name, arrays)
        if error is not None:
            raise error

    def refuse_requirement(self, failed: int, env: tuple) -> None:
        raise refusals.requirement_violated(self.name, self.requirements[failed], env)


# ----------------------------------------------------------------------------- messages

def _array_refusal(kernel: str, spec: ParamRecord, arg: object, view: ArrayView | None) -> TypeMismatchError:
    """Why ``view`` cannot be passed as ``spec`` (the checks of the binder, in order, with words)."""
    if spec.record is not None and view is not None and view.memory != HOST and view.raw is None:
        records, why = as_records(view, spec)
        if why:
            return refusals.mismatch(kernel, spec, view.describe(), why, help=record_help(spec.record))
        view = records
    error = refusals.array_problem(kernel, spec, arg, view, spec.writes)
    if error is not None:
        return error
    if spec.kind in SLICE_KINDS and view.shape[0] > 1 and view.strides[0] != 1:
        unit = "records" if spec.record is not None else "elements"
        return refusals.mismatch(kernel, spec, view.describe(), f"not contiguous: stride {view.strides[0]} {unit}",
                                 help=refusals.PASS_CONTIGUOUS)
    if spec.kind == "disjoint_tensor" and view.overlaps_itself():
        return refusals.mismatch(kernel, spec, view.describe(),
                                 f"strides {tuple(view.strides)} make different indices write the same element")
    return refusals.null_pointer(kernel, spec, view)


def _aliasing_error(kernel: str, a: ParamRecord, va: ArrayView, b: ParamRecord, vb: ArrayView) -> AliasingError:
    writer, other = (a, b) if a.writes else (b, a)
    vw, vo = (va, vb) if writer is a else (vb, va)
    if vw.obj is vo.obj:
        how = f"the same {vw.origin} is passed as `{writer.name}` and as `{other.name}`"
    else:
        lo_w, hi_w = vw.byte_range()
        lo_o, hi_o = vo.byte_range()
        how = (f"`{writer.name}` (bytes {lo_w:#x}..{hi_w:#x}) overlaps `{other.name}` "
               f"(bytes {lo_o:#x}..{hi_o:#x})")
    return AliasingError(
        f"{refusals.borrow_head(writer, other, other.writes)}: kernel `{kernel}` writes `{writer.name}`, and {how}",
        help=f"pass a separate buffer for `{writer.name}`",
    )
