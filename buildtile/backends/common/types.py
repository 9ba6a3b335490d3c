"""Scalar types and weakly typed literals, the same in every kernel language."""

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


I8 = Scalar("i8", 8, "int")
I16 = Scalar("i16", 16, "int")
I32 = Scalar("i32", 32, "int")
I64 = Scalar("i64", 64, "int")
U8 = Scalar("u8", 8, "uint")
U16 = Scalar("u16", 16, "uint")
U32 = Scalar("u32", 32, "uint")
U64 = Scalar("u64", 64, "uint")
F16 = Scalar("f16", 16, "float")
BF16 = Scalar("bf16", 16, "float")
F32 = Scalar("f32", 32, "float")
F64 = Scalar("f64", 64, "float")
BOOL = Scalar("bool", 1, "bool")
SCALARS = {t.name: t for t in (I8, I16, I32, I64, U8, U16, U32, U64, F16, BF16, F32, F64, BOOL)}
#: Python-side spelling of bool in buildtile.types
SCALARS["bool_"] = BOOL
#: complex numbers, pairs of floats (real, imaginary) laid out interleaved as NumPy's; SIMT
#: kernels only, so not among the SCALARS every language reads
C64 = Scalar("complex64", 64, "complex")
C128 = Scalar("complex128", 128, "complex")
COMPLEX = {t.name: t for t in (C64, C128)}
#: every element type an array parameter of some language may have, by manifest dtype
ELEMENT_TYPES = {**SCALARS, **COMPLEX}


@dataclass(frozen=True)
class Record(Scalar):
    """A declared record element type (SIMT): scalar fields laid out as a C compiler lays out
    the struct, each at ``offset`` bytes; ``bits`` is the padded size, a multiple of ``align``."""

    fields: tuple[tuple[str, Scalar, int], ...] = ()   # (name, type, byte offset)
    align: int = 1

    @property
    def size(self) -> int:
        return self.bits // 8

    def field(self, name: str) -> tuple[Scalar, int] | None:
        """A field's type and offset, or None."""
        for fname, ty, offset in self.fields:
            if fname == name:
                return ty, offset
        return None


def scalar_size(ty: Scalar) -> int:
    """A scalar's bytes in memory (a bool is one byte)."""
    return max(1, ty.bits // 8)


def record_of(name: str, fields: list[tuple[str, Scalar]]) -> Record:
    """The record ``name`` with C's natural layout: each field at the next multiple of its size
    (its alignment; a complex number's is its part's), the whole padded to the largest alignment."""
    offset, align, placed = 0, 1, []
    for fname, ty in fields:
        a = scalar_size(ty) // (2 if ty.kind == "complex" else 1)
        offset = -(-offset // a) * a
        placed.append((fname, ty, offset))
        offset += scalar_size(ty)
        align = max(align, a)
    size = -(-max(offset, 1) // align) * align
    return Record(name, size * 8, "record", tuple(placed), align)


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


VOID = Scalar("void", 0, "void")
