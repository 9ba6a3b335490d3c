"""Types of the SIMT typed IR."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scalar:
    name: str
    bits: int
    kind: str  # "int", "uint", "float", "bool"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    def __str__(self) -> str:
        return self.name


I32 = Scalar("i32", 32, "int")
I64 = Scalar("i64", 64, "int")
U32 = Scalar("u32", 32, "uint")
U64 = Scalar("u64", 64, "uint")
F16 = Scalar("f16", 16, "float")
BF16 = Scalar("bf16", 16, "float")
F32 = Scalar("f32", 32, "float")
F64 = Scalar("f64", 64, "float")
BOOL = Scalar("bool", 1, "bool")
SCALARS = {t.name: t for t in (I32, I64, U32, U64, F16, BF16, F32, F64, BOOL)}
#: Python-side spelling of bool in buildtile.types
SCALARS["bool_"] = BOOL


@dataclass(frozen=True)
class Weak:
    """The type of a literal (or of a value built only from literals) that has
    not met a concrete type yet; it defaults to i64 or f32."""

    kind: str  # "int" or "float"

    @property
    def default(self) -> Scalar:
        return I64 if self.kind == "int" else F32

    def __str__(self) -> str:
        return "{integer}" if self.kind == "int" else "{float}"


WEAK_INT = Weak("int")
WEAK_FLOAT = Weak("float")


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
    dims: int

    def __str__(self) -> str:
        return f"ThreadIndex{self.dims}D"


@dataclass(frozen=True)
class ShapeT:
    """``t.shape``: only subscripted by a constant axis."""

    rank: int


@dataclass(frozen=True)
class SharedT:
    """``simt.shared_array(T, n)``: block-shared memory, usable only inside ``simt.unsafe()``."""

    elem: Scalar
    size: int                 # elements; for a dynamic array, known only at launch
    access: str = "shared"
    rank: int = 1
    dynamic: bool = False     # simt.dynamic_shared_array(T): sized by the launch's dynamic shared memory

    def __str__(self) -> str:
        return f"SharedArray[{self.elem}, {'dynamic' if self.dynamic else self.size}]"


VOID = Scalar("void", 0, "void")


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
