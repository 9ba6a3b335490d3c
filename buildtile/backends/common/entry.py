"""The LLVM kernel function of a compiled kernel, built from its manifest parameters.

Every language's kernel takes its parameters as kernel ABI v1 flattens them
(``buildtile.interop.abi.kernel_params``); this module makes that function, its
``nvvm.annotations`` and the register values each parameter stands for, so the
lowerings read parameters by name and never re-derive the ABI.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import llvmlite.ir as lir

from buildtile.backends.common.llvm import GLOBAL_PTR, I32, I64, VOID, from_memory, mem_type
from buildtile.backends.common.types import ELEMENT_TYPES, Scalar
from buildtile.interop.abi import SLICE_KINDS, TENSOR_MAP, TENSOR_MAP_ALIGN, TENSOR_MAP_BYTES, PtxParam, kernel_params


@dataclass
class ArrayArg:
    """An array as a kernel sees it: where its elements are, its extents and strides (i64, in elements)."""

    data: lir.Value
    shape: list[lir.Value]
    strides: list[lir.Value]
    elem: Scalar


@dataclass
class FunctionBody:
    """A function being emitted: its entry block holds every stack slot (so that mem2reg
    promotes them) and branches to the body, where statements go."""

    fn: lir.Function
    alloca_builder: lir.IRBuilder   # in the entry block, before its branch
    builder: lir.IRBuilder          # at the start of the body


def open_body(fn: lir.Function) -> FunctionBody:
    """Give ``fn`` an entry block and a body block."""
    entry = fn.append_basic_block("entry")
    body = fn.append_basic_block("body")
    alloca_builder = lir.IRBuilder(entry)
    alloca_builder.position_before(alloca_builder.branch(body))
    return FunctionBody(fn, alloca_builder, lir.IRBuilder(body))


@dataclass
class KernelEntry(FunctionBody):
    """A kernel function and its parameters' values, by parameter name."""

    scalars: dict[str, lir.Value] = field(default_factory=dict)    # register values
    arrays: dict[str, ArrayArg] = field(default_factory=dict)
    trailing: dict[str, lir.Value] = field(default_factory=dict)   # e.g. ``logical_blocks``


def _llvm_type(param: PtxParam) -> lir.Type:
    if param.ctype == "ptr":
        return GLOBAL_PTR
    if param.ctype == TENSOR_MAP:   # passed by value: see by_value_tensor_maps
        return lir.PointerType()
    if param.ctype == "i64":
        return I64
    return mem_type(ELEMENT_TYPES[param.ctype])


def kernel_entry(module: lir.Module, symbol: str, params: list[dict], *,
                 trailing: Sequence[PtxParam] = (), reqntid: Sequence[int] | None = None,
                 min_blocks: int | None = None, records: Mapping[str, Scalar] = {}) -> KernelEntry:
    """The kernel ``symbol`` taking manifest ``params`` (then ``trailing``) as ABI v1 passes them.

    ``reqntid`` fixes the block shape (``.reqntid``), ``min_blocks`` asks for that many
    resident blocks per multiprocessor (``.minctasm``); ``records`` are the record element
    types the parameters' dtypes may name. Array pointers are ``noalias``
    (the hosts refuse a launch where an output overlaps another argument) except an
    atomic slice's: other threads write it, and NVPTX would take a noalias pointer the
    kernel only reads for ``ld.global.nc``, which it cannot select for an atomic load.
    """
    flat = [kernel_params([p]) for p in params]
    arg_params = [q for group in flat for q in group] + list(trailing)
    fn = lir.Function(module, lir.FunctionType(VOID, [_llvm_type(q) for q in arg_params]), symbol)
    fn.calling_convention = "ptx_kernel"
    for arg, q in zip(fn.args, arg_params):
        arg.name = q.name
    body = open_body(fn)
    entry = KernelEntry(fn, body.alloca_builder, body.builder)
    args = iter(fn.args)
    for p, group in zip(params, flat):
        values = [next(args) for _ in group]
        elem = records[p["dtype"]] if p["dtype"] in records else ELEMENT_TYPES[p["dtype"]]
        if p["kind"] == "scalar":
            entry.scalars[p["name"]] = from_memory(entry.alloca_builder, values[0], elem)
            continue
        data = values[0]
        if p["kind"] != "atomic_slice":
            data.add_attribute("noalias")
        if p["kind"] in SLICE_KINDS:
            entry.arrays[p["name"]] = ArrayArg(data, [values[1]], [I64(1)], elem)
        else:
            rank = p["rank"]
            entry.arrays[p["name"]] = ArrayArg(data, values[1:1 + rank], values[1 + rank:], elem)
    for q in trailing:
        entry.trailing[q.name] = next(args)
    _annotate(module, fn, reqntid, min_blocks)
    return entry


def by_value_tensor_maps(llvm_ir: str, symbol: str, params: Sequence[PtxParam]) -> str:
    """``llvm_ir`` with the kernel ``symbol``'s tensor-map parameters declared as PTX wants them:
    ``.param .align 64 .b8 [128]`` passed by value, read where they are (``nvvm.grid_constant``:
    their address is taken with ``cvta.param``, never of a local copy, which TMA cannot read).

    llvmlite writes no typed ``byval``, so the ``define`` line is rewritten."""
    define = re.compile(rf'^define [^\n]*@"{re.escape(symbol)}"\([^\n]*$', re.MULTILINE)
    match = define.search(llvm_ir)
    if match is None:
        raise ValueError(f"no definition of {symbol} in the module")
    line = match.group(0)
    for q in params:
        if q.ctype == TENSOR_MAP:
            line = line.replace(f'ptr %"{q.name}"', f'ptr byval([{TENSOR_MAP_BYTES} x i8]) align {TENSOR_MAP_ALIGN} '
                                                   f'"nvvm.grid_constant" %"{q.name}"')
    return llvm_ir[:match.start()] + line + llvm_ir[match.end():]


def _annotate(module: lir.Module, fn: lir.Function, reqntid: Sequence[int] | None, min_blocks: int | None) -> None:
    nodes = []
    for axis, n in zip("xyz", reqntid or ()):
        nodes.append(module.add_metadata([fn, lir.MetaDataString(module, f"reqntid{axis}"), I32(n)]))
    if min_blocks:
        nodes.append(module.add_metadata([fn, lir.MetaDataString(module, "minctasm"), I32(min_blocks)]))
    if nodes:
        annotations = module.add_named_metadata("nvvm.annotations")
        for node in nodes:
            annotations.add(node)
