"""The NVPTX conventions every kernel language lowers to, on llvmlite's IR builder.

A value lives in a register of :func:`reg_type` and in memory (and across the
kernel ABI) as :func:`mem_type`: f16 and bf16 values are f32 registers, rounded
to their own precision after every operation (:func:`round_half`); in memory
they are ``half`` and the 16 bits of a bf16. A bool is an ``i1`` register and
one byte in memory.
"""

from __future__ import annotations

import struct

import llvmlite.ir as lir

from buildtile.backends.common.types import BF16, BOOL, F16, F32, Record, Scalar, scalar_size

TRIPLE = "nvptx64-nvidia-cuda"
DATALAYOUT = "e-p6:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"

I1, I8, I16, I32, I64 = lir.IntType(1), lir.IntType(8), lir.IntType(16), lir.IntType(32), lir.IntType(64)
F32T, F64T, HALF = lir.FloatType(), lir.DoubleType(), lir.HalfType()
VOID = lir.VoidType()
GLOBAL_PTR = lir.PointerType(addrspace=1)
SHARED_PTR = lir.PointerType(addrspace=3)
CONST_PTR = lir.PointerType(addrspace=4)


def new_module(name: str) -> lir.Module:
    """An empty module for the NVPTX target."""
    module = lir.Module(name=name)
    module.triple = TRIPLE
    module.data_layout = DATALAYOUT
    return module


# ------------------------------------------------------------ value representation
def reg_type(ty: Scalar) -> lir.Type:
    """The register type of a value (f16/bf16: f32; a complex number: a pair of floats)."""
    if ty == BOOL:
        return I1
    if isinstance(ty, Record):
        return mem_type(ty)   # a whole record is only ever copied, as it is stored
    if ty.kind == "complex":
        part = F64T if ty.bits == 128 else F32T
        return lir.LiteralStructType([part, part])
    if ty.is_int:
        return lir.IntType(ty.bits)
    return F64T if ty.bits == 64 else F32T


def mem_type(ty: Scalar) -> lir.Type:
    """How a value is stored and crosses the kernel ABI: bool as one byte, bf16 as its 16 bits."""
    if ty == BOOL:
        return I8
    if ty == F16:
        return HALF
    if ty == BF16:
        return I16
    if isinstance(ty, Record):
        return record_struct(ty)[0]
    return reg_type(ty)


def record_struct(rec: Record) -> tuple[lir.Type, dict[str, int]]:
    """A record as a packed struct whose padding is spelled out as byte arrays, so that its
    fields sit at the record's own offsets whatever the target's layout rules; with the
    member index of each field."""
    members, slots, at = [], {}, 0
    for name, ty, offset in rec.fields:
        if offset > at:
            members.append(lir.ArrayType(I8, offset - at))
        slots[name] = len(members)
        members.append(mem_type(ty))
        at = offset + scalar_size(ty)
    if rec.size > at:
        members.append(lir.ArrayType(I8, rec.size - at))
    return lir.LiteralStructType(members, packed=True), slots


def is_half(ty: Scalar) -> bool:
    """True for the types kept in f32 registers and rounded after every operation."""
    return ty in (F16, BF16)


def from_memory(b: lir.IRBuilder, value: lir.Value, ty: Scalar) -> lir.Value:
    """A stored value (``mem_type``) as a register value (``reg_type``)."""
    if ty == BOOL:
        return b.icmp_unsigned("!=", value, I8(0))
    if ty == F16:
        return b.fpext(value, F32T)
    if ty == BF16:   # bf16 is the high half of an f32
        return b.bitcast(b.shl(b.zext(value, I32), I32(16)), F32T)
    return value


def to_memory(b: lir.IRBuilder, value: lir.Value, ty: Scalar) -> lir.Value:
    """A register value as stored (``mem_type``), rounding to nearest even."""
    if ty == BOOL:
        return b.zext(value, I8)
    if ty == F16:
        return b.fptrunc(value, HALF)
    if ty == BF16:
        bits = b.bitcast(value, I32)
        lsb = b.and_(b.lshr(bits, I32(16)), I32(1))
        rounded = b.lshr(b.add(bits, b.add(I32(0x7FFF), lsb)), I32(16))
        is_nan = b.fcmp_unordered("uno", value, value)
        return b.trunc(b.select(is_nan, I32(0x7FC0), rounded), I16)
    return value


def round_half(b: lir.IRBuilder, value: lir.Value, ty: Scalar) -> lir.Value:
    """Round an f32 register value to f16/bf16 precision (no-op for other types)."""
    if is_half(ty):
        return from_memory(b, to_memory(b, value, ty), ty)
    return value


def convert(b: lir.IRBuilder, v: lir.Value, src: Scalar, dst: Scalar) -> lir.Value:
    """A numeric conversion with C semantics (truncation toward zero for float->int)."""
    if src == dst:
        return v
    if is_half(src):      # already an f32 register value
        src = F32
    if is_half(dst):
        return round_half(b, convert(b, v, src, F32), dst)
    t = reg_type(dst)
    if dst == BOOL:
        return b.fcmp_unordered("!=", v, v.type(0.0)) if src.is_float else b.icmp_unsigned("!=", v, v.type(0))
    if src == BOOL:
        return b.uitofp(v, t) if dst.is_float else b.zext(v, t)
    if src.is_float and dst.is_float:
        return b.fpext(v, t) if dst.bits > src.bits else b.fptrunc(v, t)
    if src.is_float:
        return b.fptosi(v, t) if dst.kind == "int" else b.fptoui(v, t)
    if dst.is_float:
        return b.sitofp(v, t) if src.kind == "int" else b.uitofp(v, t)
    if dst.bits > src.bits:
        return b.sext(v, t) if src.kind == "int" else b.zext(v, t)
    if dst.bits < src.bits:
        return b.trunc(v, t)
    return v


# ------------------------------------------------------------ constants
def bf16_round(x: float) -> float:
    """``x`` rounded to bf16 (nearest even), as the f32 value it stands for."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def const_of(ty: Scalar, value: object) -> lir.Constant:
    """A register constant of ``ty``."""
    t = reg_type(ty)
    if ty == BOOL:
        return I1(1 if value else 0)
    if ty.is_float:
        return t(float(value))
    return t(int(value))


def rounded_const(ty: Scalar, value: object) -> lir.Constant:
    """A register constant of ``ty``, an f16/bf16 one rounded to its precision first."""
    if ty == F16:
        return F32T(struct.unpack("<e", struct.pack("<e", value))[0])
    if ty == BF16:
        return F32T(bf16_round(float(value)))
    return const_of(ty, value)


def memory_const(ty: Scalar, value: object) -> lir.Constant:
    """A constant of ``ty`` as stored (``mem_type``): for initializers of arrays in memory."""
    if ty == F16:
        return HALF(struct.unpack("<e", struct.pack("<e", value))[0])
    if ty == BF16:
        bits = struct.unpack("<I", struct.pack("<f", bf16_round(float(value))))[0]
        return I16(bits >> 16)
    if ty == BOOL:
        return I8(1 if value else 0)
    return const_of(ty, value)


def zero_of(t: lir.Type) -> lir.Constant:
    """The zero of an LLVM type."""
    if isinstance(t, lir.LiteralStructType):
        return lir.Constant(t, None)
    return t(0.0) if isinstance(t, (lir.FloatType, lir.DoubleType, lir.HalfType)) else t(0)


# ------------------------------------------------------------ Python arithmetic on registers
def floor_div(b: lir.IRBuilder, a: lir.Value, n: lir.Value) -> lir.Value:
    """Signed ``a // n`` rounding toward -inf, as Python: C's truncated quotient, adjusted
    when it is inexact and the signs differ."""
    q, r = b.sdiv(a, n), b.srem(a, n)
    adjust = b.and_(b.icmp_signed("!=", r, a.type(0)), b.icmp_signed("<", b.xor(r, n), a.type(0)))
    return b.sub(q, b.zext(adjust, a.type))


def floor_mod(b: lir.IRBuilder, a: lir.Value, n: lir.Value) -> lir.Value:
    """Signed ``a % n`` with the divisor's sign, as Python."""
    r = b.srem(a, n)
    adjust = b.and_(b.icmp_signed("!=", r, a.type(0)), b.icmp_signed("<", b.xor(r, n), a.type(0)))
    return b.select(adjust, b.add(r, n), r)


def compare(b: lir.IRBuilder, op: str, ty: Scalar, lhs: lir.Value, rhs: lir.Value) -> lir.Value:
    """``lhs op rhs`` for values of ``ty``: ordered float comparisons are false with NaN,
    ``!=`` is true with NaN (IEEE, as Python)."""
    if ty.is_float:
        return b.fcmp_unordered("!=", lhs, rhs) if op == "!=" else b.fcmp_ordered(op, lhs, rhs)
    if ty.kind == "uint" or ty == BOOL:
        return b.icmp_unsigned(op, lhs, rhs)
    return b.icmp_signed(op, lhs, rhs)


# ------------------------------------------------------------ declarations and intrinsics
def declare(module: lir.Module, name: str, ret: lir.Type, args: list[lir.Type]) -> lir.Function:
    """A function (intrinsic or libdevice) declared once per module."""
    fn = module.globals.get(name)
    if fn is None:
        fn = lir.Function(module, lir.FunctionType(ret, args), name)
    return fn


def type_suffix(t: lir.Type) -> str:
    """An overloaded intrinsic's suffix for ``t``: ``i32``, ``f32`` ..."""
    if isinstance(t, lir.IntType):
        return f"i{t.width}"
    return {F32T: "f32", F64T: "f64", HALF: "f16"}[t]


def intrinsic(module: lir.Module, name: str, t: lir.Type, nargs: int) -> lir.Function:
    """An overloaded LLVM intrinsic over one type: ``llvm.maxnum.f32``."""
    return declare(module, f"{name}.{type_suffix(t)}", t, [t] * nargs)


def libdevice(module: lir.Module, name: str, t: lir.Type, nargs: int) -> lir.Function:
    """libdevice's ``__nv_<name>`` over ``t``: ``__nv_expf`` for f32, ``__nv_exp`` for f64."""
    suffix = "f" if t != F64T else ""
    return declare(module, f"__nv_{name}{suffix}", t, [t] * nargs)


# ------------------------------------------------------------ inline PTX, special registers, barriers
def asm(b: lir.IRBuilder, ret: lir.Type, text: str, constraints: str, args: list[lir.Value],
        side_effect: bool = False) -> lir.Value:
    """Inline PTX ``text`` over ``args``."""
    fnty = lir.FunctionType(ret, [a.type for a in args])
    return b.call(lir.InlineAsm(fnty, text, constraints, side_effect=side_effect), args)


def barrier(b: lir.IRBuilder) -> lir.Value:
    """``bar.sync 0``: every thread of the block arrives; orders shared memory accesses."""
    return asm(b, VOID, "bar.sync 0;", "~{memory}", [], side_effect=True)


def sreg(b: lir.IRBuilder, name: str) -> lir.Value:
    """A PTX special register (``tid.x``, ``ctaid.y`` ...) as an i32."""
    return b.call(declare(b.module, "llvm.nvvm.read.ptx.sreg." + name, I32, []), [])


def dynamic_smem_size(b: lir.IRBuilder) -> lir.Value:
    """The bytes of dynamic shared memory the launch gave (i32)."""
    return asm(b, I32, "mov.u32 $0, %dynamic_smem_size;", "=r", [])


#: (inline-asm register letter, PTX bit width) of each memory type
_ASM_REG = {HALF: ("h", 16), I16: ("h", 16), I8: ("h", 8), F32T: ("r", 32), I32: ("r", 32), I64: ("l", 64),
            F64T: ("l", 64)}


def asm_reg(ty: Scalar) -> tuple[str, int, lir.Type]:
    """How a stored value of ``ty`` travels through inline PTX: letter, bits, LLVM type of the operand."""
    letter, bits = _ASM_REG[mem_type(ty)]
    operand = {"h": I16, "r": I32, "l": I64}[letter]
    return letter, bits, operand


def to_asm_operand(b: lir.IRBuilder, value: lir.Value, ty: Scalar) -> lir.Value:
    """A memory-typed value as the integer an inline PTX operand takes."""
    _, _, operand = asm_reg(ty)
    if ty == BOOL or value.type == I8:     # a byte travels in a 16-bit register
        return b.zext(value, I16)
    if value.type == operand:
        return value
    return b.bitcast(value, operand)


def from_asm_operand(b: lir.IRBuilder, value: lir.Value, ty: Scalar) -> lir.Value:
    """The inverse of :func:`to_asm_operand`."""
    t = mem_type(ty)
    if ty == BOOL or t == I8:
        return b.trunc(value, I8)
    if value.type == t:
        return value
    return b.bitcast(value, t)


# ------------------------------------------------------------ counter-based random numbers
#: Philox-4x32 multipliers and Weyl key increments (Salmon et al., SC 2011)
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
PHILOX_ROUNDS = 10


def mulhi(b: lir.IRBuilder, x: lir.Value, y: lir.Value, signed: bool = False) -> lir.Value:
    """The high half of the full product ``x * y`` (``mul.hi``)."""
    width = x.type.width
    wide = lir.IntType(2 * width)
    ext = b.sext if signed else b.zext
    product = b.mul(ext(x, wide), ext(y, wide))
    return b.trunc(b.lshr(product, wide(width)), x.type)


def philox4x32(b: lir.IRBuilder, counter: list[lir.Value], key: list[lir.Value]) -> list[lir.Value]:
    """Philox-4x32-10 of four i32 counter words under two i32 key words, as Random123 defines it:
    each round maps (c0, c1, c2, c3) to (hi(M1*c2) ^ c1 ^ k0, lo(M1*c2), hi(M0*c0) ^ c3 ^ k1, lo(M0*c0)),
    and the key grows by (W0, W1) between rounds."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for r in range(PHILOX_ROUNDS):
        if r:
            k0, k1 = b.add(k0, I32(PHILOX_W0)), b.add(k1, I32(PHILOX_W1))
        hi0, lo0 = mulhi(b, c0, I32(PHILOX_M0)), b.mul(c0, I32(PHILOX_M0))
        hi1, lo1 = mulhi(b, c2, I32(PHILOX_M1)), b.mul(c2, I32(PHILOX_M1))
        c0, c1, c2, c3 = b.xor(b.xor(hi1, c1), k0), lo1, b.xor(b.xor(hi0, c3), k1), lo0
    return [c0, c1, c2, c3]


def uniform_f32(b: lir.IRBuilder, word: lir.Value) -> lir.Value:
    """An f32 in [0, 1) from a random i32: its top 24 bits times 2**-24 (exact)."""
    return b.fmul(b.uitofp(b.lshr(word, I32(8)), F32T), F32T(2.0 ** -24))


def box_muller(b: lir.IRBuilder, w0: lir.Value, w1: lir.Value, log: lir.Function, sqrt: lir.Function,
               cospi: lir.Function) -> lir.Value:
    """A standard normal f32 from two random i32 words (Box-Muller):
    ``sqrt(-2 log u1) * cos(2 pi u2)``, u1 = ((w0 >> 8) + 1) * 2**-24 in (0, 1], u2 = uniform(w1)."""
    u1 = b.fmul(b.uitofp(b.add(b.lshr(w0, I32(8)), I32(1)), F32T), F32T(2.0 ** -24))
    u2 = uniform_f32(b, w1)
    radius = b.call(sqrt, [b.fmul(F32T(-2.0), b.call(log, [u1]))])
    return b.fmul(radius, b.call(cospi, [b.fmul(F32T(2.0), u2)]))
