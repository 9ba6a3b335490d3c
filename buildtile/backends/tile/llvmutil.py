"""Small LLVM IR helpers for the tile lowering: types, intrinsics, inline PTX.

Value representation follows the SIMT backend (whose conversions are reused):
f16 and bf16 live in f32 registers, rounded after every operation; in
memory they are ``half`` and the 16 bits of a bf16.
"""

from __future__ import annotations

import llvmlite.ir as lir

from buildtile.backends.simt import lower as _simt
from buildtile.backends.tile.types import BF16, BOOL, F16, Scalar

I1, I8, I16, I32, I64 = lir.IntType(1), lir.IntType(8), lir.IntType(16), lir.IntType(32), lir.IntType(64)
F32T, F64T, HALF = lir.FloatType(), lir.DoubleType(), lir.HalfType()
VOID = lir.VoidType()

# the SIMT backend's scalar conventions, shared so that both tracks agree on every value
DATALAYOUT, TRIPLE = _simt.DATALAYOUT, _simt.TRIPLE
reg_type = _simt.llvm_type          # a value's register type (f16/bf16: f32)
mem_type = _simt.abi_type           # how an element is stored (bool: i8, bf16: its 16 bits)
from_memory, to_memory = _simt.from_memory, _simt.to_memory
round_half, convert = _simt.round_half, _simt.convert
GLOBAL_PTR = lir.PointerType(addrspace=1)
SHARED_PTR = lir.PointerType(addrspace=3)


def declare(module: lir.Module, name: str, ret: lir.Type, args: list[lir.Type]) -> lir.Function:
    """A function (intrinsic or libdevice) declared once per module."""
    fn = module.globals.get(name)
    if fn is None:
        fn = lir.Function(module, lir.FunctionType(ret, args), name)
    return fn


def type_suffix(t: lir.Type) -> str:
    if isinstance(t, lir.IntType):
        return f"i{t.width}"
    return {F32T: "f32", F64T: "f64", HALF: "f16"}[t]


def intrinsic(module: lir.Module, name: str, t: lir.Type, nargs: int) -> lir.Function:
    """An overloaded LLVM intrinsic over one type: ``llvm.maxnum.f32``."""
    return declare(module, f"{name}.{type_suffix(t)}", t, [t] * nargs)


def asm(b: lir.IRBuilder, ret: lir.Type, text: str, constraints: str, args: list[lir.Value],
        side_effect: bool = False) -> lir.Value:
    fnty = lir.FunctionType(ret, [a.type for a in args])
    return b.call(lir.InlineAsm(fnty, text, constraints, side_effect=side_effect), args)


def barrier(b: lir.IRBuilder) -> None:
    """``bar.sync 0``: every thread of the block arrives; orders shared memory accesses."""
    asm(b, VOID, "bar.sync 0;", "~{memory}", [], side_effect=True)


def sreg(b: lir.IRBuilder, name: str) -> lir.Value:
    """A PTX special register (``tid.x``, ``ctaid.y`` ...) as an i32."""
    return b.call(declare(b.module, "llvm.nvvm.read.ptx.sreg." + name, I32, []), [])


def const_of(dtype: Scalar, value) -> lir.Constant:
    """A register constant of ``dtype``."""
    t = reg_type(dtype)
    if dtype == BOOL:
        return I1(1 if value else 0)
    if dtype.is_float:
        return t(float(value))
    return t(int(value))


def zero_of(t: lir.Type) -> lir.Constant:
    return t(0.0) if isinstance(t, (lir.FloatType, lir.DoubleType, lir.HalfType)) else t(0)


#: (inline-asm register letter, PTX bit width) of each memory type of a tile element
_ASM_REG = {HALF: ("h", 16), I16: ("h", 16), I8: ("h", 8), F32T: ("r", 32), I32: ("r", 32), I64: ("l", 64)}


def asm_reg(dtype: Scalar) -> tuple[str, int, lir.Type]:
    """How an element of ``dtype`` travels through inline PTX: letter, bits, LLVM type of the operand."""
    t = mem_type(dtype)
    letter, bits = _ASM_REG[t]
    operand = {"h": I16, "r": I32, "l": I64}[letter]
    return letter, bits, operand


def to_asm_operand(b: lir.IRBuilder, value: lir.Value, dtype: Scalar) -> lir.Value:
    """A memory-typed element as the integer an inline PTX operand takes."""
    _, _, operand = asm_reg(dtype)
    if dtype == BOOL:
        return b.zext(value, I16)
    if value.type == operand:
        return value
    return b.bitcast(value, operand)


def from_asm_operand(b: lir.IRBuilder, value: lir.Value, dtype: Scalar) -> lir.Value:
    """The inverse of :func:`to_asm_operand`."""
    t = mem_type(dtype)
    if dtype == BOOL:
        return b.trunc(value, I8)
    if value.type == t:
        return value
    return b.bitcast(value, t)


def is_half(dtype: Scalar) -> bool:
    return dtype in (F16, BF16)
