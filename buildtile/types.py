"""Type names used in kernel signatures.

These objects exist so that kernel modules import and run as ordinary
Python (annotations are evaluated at import time). The compiler never looks
at them: it reads the names from the source. Their only runtime job is to be
subscriptable and to print readably.
"""

from __future__ import annotations


class ScalarType:
    """A scalar dtype name such as ``f32``; calling it is a cast in kernels."""

    def __init__(self, name: str, bits: int, kind: str) -> None:
        self.name = name
        self.bits = bits
        self.kind = kind  # "int", "uint", "float", "bool" or "complex"

    def __call__(self, value, imag=0.0):  # a cast, when used outside a kernel
        if self.kind == "complex":
            return complex(value, imag)
        if self.kind == "bool":
            return bool(value)
        if self.kind == "float":
            return float(value)
        return int(value)

    def __repr__(self) -> str:
        return self.name


i8 = ScalarType("i8", 8, "int")
i16 = ScalarType("i16", 16, "int")
i32 = ScalarType("i32", 32, "int")
i64 = ScalarType("i64", 64, "int")
u8 = ScalarType("u8", 8, "uint")
u16 = ScalarType("u16", 16, "uint")
u32 = ScalarType("u32", 32, "uint")
u64 = ScalarType("u64", 64, "uint")
f16 = ScalarType("f16", 16, "float")
bf16 = ScalarType("bf16", 16, "float")
f32 = ScalarType("f32", 32, "float")
f64 = ScalarType("f64", 64, "float")
bool_ = ScalarType("bool", 1, "bool")
#: complex numbers (SIMT): ``complex64(re, im)`` builds one from its parts
complex64 = ScalarType("complex64", 64, "complex")
complex128 = ScalarType("complex128", 128, "complex")

SCALAR_TYPES = {t.name: t for t in (i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, bool_)}


class _ParamKind:
    """A parameter kind (``Slice``, ``Tensor``...) that takes ``[dtype]`` or ``[dtype, rank]``."""

    def __init__(self, name: str, takes_rank: bool) -> None:
        self.name = name
        self.takes_rank = takes_rank

    def __getitem__(self, args):
        return _ParamType(self, args if isinstance(args, tuple) else (args,))

    def __repr__(self) -> str:
        return self.name


class _ParamType:
    def __init__(self, kind: _ParamKind, args: tuple) -> None:
        self.kind = kind
        self.args = args

    def __repr__(self) -> str:
        return f"{self.kind.name}[{', '.join(map(repr, self.args))}]"


Slice = _ParamKind("Slice", takes_rank=False)
DisjointSlice = _ParamKind("DisjointSlice", takes_rank=False)
AtomicSlice = _ParamKind("AtomicSlice", takes_rank=False)
Tensor = _ParamKind("Tensor", takes_rank=True)
DisjointTensor = _ParamKind("DisjointTensor", takes_rank=True)
#: a device function's parameter for a kernel's shared array: ``SharedArray[f32]`` or ``SharedArray[f32, 2]``
SharedArray = _ParamKind("SharedArray", takes_rank=True)

__all__ = [
    "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64", "bool_",
    "complex64", "complex128",
    "Slice", "DisjointSlice", "AtomicSlice", "Tensor", "DisjointTensor", "SharedArray",
]
