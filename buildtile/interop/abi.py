"""Kernel ABI v1: how each parameter kind reaches a compiled kernel.

This module is the single source of truth; ``buildtile/abi.h`` documents the
same rules for C and C++ hosts, and both hosts build their argument arrays
from :func:`kernel_params`.

A kernel's PTX entry takes, for each declared parameter in order:

=================  ============================================================
kind               PTX parameters
=================  ============================================================
scalar T           one value of T (bool as one byte, f16/bf16 as 16 bits)
slice, disjoint_   ``T* data`` (64-bit), ``int64 len`` (elements)
slice, atomic_
slice
tensor, disjoint_  ``T* data``, then ``int64 shape[rank]``, then
tensor, tile_out,  ``int64 strides[rank]`` (in elements, not bytes)
tile_atomic
=================  ============================================================

An array's ``T`` may be a record (a ``@simt.record`` class): ``data`` points at
C structs laid out as the manifest's ``records`` says (record_layout.py), and
``len``, ``shape`` and ``strides`` count records, so a stride is in units of the
record's size. Both hosts take such an array as its bytes: a ``u8``/``i8``
array (a DLTensor in C) of rank + 1 dimensions whose last extent is the record's
size and last stride 1, its other byte strides whole records, its data aligned
to the record's alignment (runtime/record_arrays.py, bt_checks.c); the Python
host also takes a structured array whose fields are the record's.

``tile_out`` is a Tile kernel's ``tile.Out`` parameter; its tile shape is a
compile-time constant of the specialization launched (manifest.py).
``tile_atomic`` is a ``tile.Atomic`` parameter: not partitioned, read and
written (atomic adds) by every block.

A Tile specialization whose record has ``"schedule": true`` takes one more,
trailing, ``int64``, the tile schedule: the rows of tiles per band of the
grouped order (1: row order; negative: the order the compiler chose, grouped
by 8 for 2-D ``tile.mma`` kernels, else row). It visits the linear tile ids
from its linear block id in steps of the grid's block count, so a grid of
fewer blocks than tiles is a persistent launch (backends/tile/schedule.py).

A kernel whose contract has ``coarsen`` = K > 1 runs K logical blocks in each
physical block: hosts launch ``ceil(grid.x / K)`` blocks along x and pass one
more, trailing, ``int64``: the logical ``grid.x``.

A Tile specialization's TMA entry (manifest ``tma``, sm_90a) takes the same
parameters, then one ``CUtensorMap`` by value per entry of its ``maps``, in that
order: 128 bytes each, aligned to 64 (``.param .align 64 .b8 [128]``), encoded
by the host with ``cuTensorMapEncodeTiled`` over the array the entry names.
"""

from __future__ import annotations

from dataclasses import dataclass

ABI_VERSION = 1

#: parameter kinds and the role each implies for aliasing checks
PARAM_KINDS = {
    "scalar": "in",
    "slice": "in",
    "tensor": "in",
    "disjoint_slice": "out",
    "disjoint_tensor": "out",
    "atomic_slice": "inout",
    "tile_out": "out",
    "tile_atomic": "inout",
}

#: dtype name -> (bytes, DLPack type code, DLPack bits, NumPy typestr)
DTYPES = {
    "bool": (1, 6, 8, "|b1"),
    "i8": (1, 0, 8, "|i1"),
    "i16": (2, 0, 16, "<i2"),
    "i32": (4, 0, 32, "<i4"),
    "i64": (8, 0, 64, "<i8"),
    "u8": (1, 1, 8, "|u1"),
    "u16": (2, 1, 16, "<u2"),
    "u32": (4, 1, 32, "<u4"),
    "u64": (8, 1, 64, "<u8"),
    "f16": (2, 2, 16, "<f2"),
    "bf16": (2, 4, 16, "<V2"),  # NumPy has no bf16; CAI producers use "<V2"
    "f32": (4, 2, 32, "<f4"),
    "f64": (8, 2, 64, "<f8"),
    "complex64": (8, 5, 64, "<c8"),      # interleaved (real, imaginary) f32 pairs
    "complex128": (16, 5, 128, "<c16"),  # ... f64 pairs
}

#: dtypes of array elements only: no kernel takes a scalar of them (a complex value crosses
#: the ABI in an array)
ELEMENT_ONLY_DTYPES = frozenset({"complex64", "complex128"})

#: DLPack type codes (dlpack.h DLDataTypeCode)
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT, DL_COMPLEX, DL_BOOL = 0, 1, 2, 4, 5, 6


@dataclass(frozen=True)
class PtxParam:
    """One flattened kernel parameter: a name and its C type in the ABI."""

    name: str
    ctype: str  # "ptr", "i64", or a scalar dtype name


#: the parameter kinds passed as pointer + length (kernel ABI v1)
SLICE_KINDS = ("slice", "disjoint_slice", "atomic_slice")


def kernel_params(params: list[dict]) -> list[PtxParam]:
    """Flatten manifest parameters into the PTX entry's parameter list."""
    flat: list[PtxParam] = []
    for p in params:
        kind, name = p["kind"], p["name"]
        if kind == "scalar":
            flat.append(PtxParam(name, p["dtype"]))
        elif kind in SLICE_KINDS:
            flat += [PtxParam(f"{name}.data", "ptr"), PtxParam(f"{name}.len", "i64")]
        elif kind in ("tensor", "disjoint_tensor", "tile_out", "tile_atomic"):
            rank = p["rank"]
            flat.append(PtxParam(f"{name}.data", "ptr"))
            flat += [PtxParam(f"{name}.shape{k}", "i64") for k in range(rank)]
            flat += [PtxParam(f"{name}.stride{k}", "i64") for k in range(rank)]
        else:
            raise ValueError(f"unknown parameter kind {kind!r}")
    return flat


#: how each parameter kind is written in kernel source
KIND_SPELLING = {
    "slice": "Slice", "disjoint_slice": "DisjointSlice", "atomic_slice": "AtomicSlice",
    "tensor": "Tensor", "disjoint_tensor": "DisjointTensor", "tile_out": "tile.Out", "tile_atomic": "tile.Atomic",
}


def spell_type(kind: str, dtype: str, rank: int) -> str:
    """A parameter's type as written in kernel source: ``f32``, ``Slice[f32]``, ``Tensor[f32, 2]``."""
    if kind == "scalar":
        return dtype
    if kind in SLICE_KINDS:
        return f"{KIND_SPELLING[kind]}[{dtype}]"
    return f"{KIND_SPELLING[kind]}[{dtype}, {rank}]"


def trailing_params(contract: dict) -> list[PtxParam]:
    """The PTX parameters after the declared ones: the logical ``grid.x`` of a coarsened kernel."""
    factor = contract.get("coarsen", 1) or 1
    return [] if factor == 1 else [PtxParam("logical_blocks", "i64")]


#: the trailing parameter of a Tile specialization that takes a schedule
TILE_SCHEDULE = PtxParam("tile_schedule", "i64")
#: the C type of a tensor-map parameter of a TMA entry: a ``CUtensorMap`` passed by value
TENSOR_MAP = "tensor_map"
TENSOR_MAP_BYTES, TENSOR_MAP_ALIGN = 128, 64


def tensor_map_param(array: str) -> PtxParam:
    """The tensor-map parameter of a TMA entry that describes the array parameter ``array``."""
    return PtxParam(f"{array}.tensor_map", TENSOR_MAP)
#: the tile schedule that keeps the order the compiler chose
COMPILED_ORDER = -1


def launch_extras(contract: dict, grid_x: int) -> tuple[int, list[int]]:
    """(physical grid.x, trailing int64 parameters) of a launch of ``grid_x`` logical blocks."""
    factor = contract.get("coarsen", 1) or 1
    if factor == 1:
        return grid_x, []
    return -(-grid_x // factor), [grid_x]


def mangle(module: str, name: str) -> str:
    """The PTX entry name of a kernel: ``k``, then each dotted part of the module and the
    kernel's name, each prefixed by its length (``pkg.ops`` / ``scale`` -> ``k3pkg3ops5scale``).

    The lengths make the mapping injective (``pkg.a_b`` and ``pkg.a.b`` differ, as do
    ``a.b__c`` and ``a__b.c``), every part is kept verbatim for readability, and the result
    is a C and PTX identifier: a letter, then the parts' ASCII letters, digits and ``_``.
    A suffix starting with ``_`` (a tile specialization's ``__t128``) cannot be mistaken
    for part of a name, since the last length says where the name ends."""
    return "k" + "".join(f"{len(part)}{part}" for part in [*module.split("."), name])
