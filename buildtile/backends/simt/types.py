"""Types of the SIMT typed IR: array parameters, thread-index witnesses, shared arrays.

Scalars and weak literals are the shared ones of ``buildtile.backends.common.types``.
"""

from __future__ import annotations

from dataclasses import dataclass

from buildtile.backends.common.contract import ParamFacts
from buildtile.backends.common.types import (  # noqa: F401 - the SIMT typer speaks of scalars through this module
    BF16, BOOL, C64, C128, COMPLEX, Record, F16, F32, F64, I32, I64, SCALARS, U32, U64, VOID, WEAK_FLOAT, WEAK_INT, Scalar,
    Weak,
)


def complex_part(ty: Scalar) -> Scalar:
    """The float type of a complex type's real and imaginary parts."""
    return F64 if ty == C128 else F32


def element_align(ty: Scalar) -> int:
    """The alignment of an element in memory, in bytes: a complex number's is its part's, as NumPy's;
    a record's is its largest field's."""
    if isinstance(ty, Record):
        return ty.align
    return max(1, ty.bits // (16 if ty.kind == "complex" else 8))


def complex_of(part: Scalar) -> Scalar:
    """The complex type whose parts are ``part`` (f64: complex128; f16, bf16, f32: complex64)."""
    return C128 if part == F64 else C64


@dataclass(frozen=True)
class SliceT:
    elem: Scalar
    access: str  # "read", "disjoint", "atomic"

    def __str__(self) -> str:
        name = {"read": "Slice", "disjoint": "DisjointSlice", "atomic": "AtomicSlice"}[self.access]
        return f"{name}[{self.elem}]"

    @property
    def rank(self) -> int:
        return 1


@dataclass(frozen=True)
class TensorT:
    elem: Scalar
    rank: int
    access: str  # "read", "disjoint"

    def __str__(self) -> str:
        name = "Tensor" if self.access == "read" else "DisjointTensor"
        return f"{name}[{self.elem}, {self.rank}]"


@dataclass(frozen=True)
class WitnessT:
    """A ThreadIndex witness: one axis of ``index_Nd()``, unique per thread.

    In arithmetic it is an i64; only an unmodified witness may index a
    write into a disjoint parameter.
    """

    dims: int   # N of the index_Nd() that made it
    axis: int   # 0 = slowest (row) ... dims-1 = fastest (x)

    def __str__(self) -> str:
        return "a thread index (i64)"


@dataclass(frozen=True)
class WitnessTupleT:
    """``index_Nd()`` (slowest axis first: row, col) or ``grid(N)`` (x first: col, row)."""

    dims: int
    x_first: bool = False

    def __str__(self) -> str:
        return f"ThreadIndex{self.dims}D"


@dataclass(frozen=True)
class TupleT:
    """The result of a device function that returns several scalars."""

    elems: tuple

    def __str__(self) -> str:
        return f"tuple[{', '.join(str(e) for e in self.elems)}]"


@dataclass(frozen=True)
class ValuesT:
    """A tuple of values the typer unpacks at once (``simt.gridsize(2)``); never stored."""

    count: int

    def __str__(self) -> str:
        return f"a tuple of {self.count} values"


@dataclass(frozen=True)
class ShapeT:
    """``t.shape``: only subscripted by a constant axis."""

    rank: int


@dataclass(frozen=True)
class SharedT:
    """``simt.shared_array(T, n)`` or ``(T, (rows, cols))``: block-shared memory, usable only
    inside ``simt.unsafe()``; a multi-dimensional one is row-major."""

    elem: Scalar
    size: int                 # elements; for a dynamic array, known only at launch
    access: str = "shared"
    rank: int = 1
    dynamic: bool = False     # simt.dynamic_shared_array(T): sized by the launch's dynamic shared memory
    shape: tuple[int, ...] = ()   # a static array's extents (rank of them)
    view: bool = False        # a device function's SharedArray[T, rank] parameter: extents passed in

    def __str__(self) -> str:
        if self.view:
            return f"SharedArray[{self.elem}]" if self.rank == 1 else f"SharedArray[{self.elem}, {self.rank}]"
        if self.dynamic:
            return f"SharedArray[{self.elem}, dynamic]"
        return f"SharedArray[{self.elem}, {self.size if self.rank == 1 else self.shape}]"


def value_type(ty):
    """The arithmetic type a value acts as (a witness acts as an i64)."""
    return I64 if isinstance(ty, WitnessT) else ty


def param_kind_name(ty) -> str:
    """Manifest ``kind`` of a parameter type."""
    if isinstance(ty, Scalar):
        return "scalar"
    if isinstance(ty, SliceT):
        return {"read": "slice", "disjoint": "disjoint_slice", "atomic": "atomic_slice"}[ty.access]
    return "tensor" if ty.access == "read" else "disjoint_tensor"


def param_facts(ty) -> ParamFacts:
    """What a launch contract's ``requires`` may say of a parameter of type ``ty``."""
    if isinstance(ty, Scalar):
        return ParamFacts.scalar(ty.is_int)
    return ParamFacts.array(ty.rank)
