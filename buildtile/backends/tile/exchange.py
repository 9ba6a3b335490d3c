"""Moving tile elements between threads: layout conversions and reductions.

Both go through registers first and shared memory only when they must:

* a reduction combines the registers of a thread, then the lanes of a warp
  with butterfly shuffles (every lane ends with the result), then -- only
  if warps hold parts of the reduced axis -- one exchange through shared
  memory, read back by every thread in one fixed order, so copies agree;
* a conversion writes the tile to shared memory in one layout and reads it
  back in the other, with vector accesses where both layouts allow.

Every shared-memory exchange is bracketed by barriers (the scratch area is
reused by the next exchange).
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as lir

from buildtile.backends.common.llvm import (
    F32T,
    I8,
    I32,
    I64,
    barrier,
    declare,
    intrinsic,
    reg_type,
    round_half,
)
from buildtile.backends.tile.ir import INDEX_DTYPE, INDEX_REDUCTIONS
from buildtile.backends.tile.layout import Layout
from buildtile.backends.tile.types import BOOL, Scalar


@dataclass
class TileVal:
    """A tile's registers in one layout (register values, as ``reg_type(dtype)``)."""

    layout: Layout
    regs: list[lir.Value]
    dtype: Scalar


def _slot_type(dtype: Scalar) -> lir.Type:
    return I8 if dtype == BOOL else reg_type(dtype)


def _slot_bytes(dtype: Scalar) -> int:
    return _bytes_of(_slot_type(dtype))


def _bytes_of(t: lir.Type) -> int:
    return t.width // 8 if isinstance(t, lir.IntType) else (8 if t == lir.DoubleType() else 4)


def _to_slot(b, v, dtype):
    return b.zext(v, I8) if dtype == BOOL else v


def _from_slot(b, v, dtype):
    return b.icmp_unsigned("!=", v, I8(0)) if dtype == BOOL else v


def _row_major(shape: tuple[int, ...]) -> list[int]:
    strides, acc = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        strides[d] = acc
        acc *= shape[d]
    return strides


def _linear(em, layout: Layout, r: int, scale: int = 1) -> lir.Value:
    """``scale * (row-major index of register r's element)``, as an i32."""
    strides = _row_major(layout.shape)
    b = em.b
    idx = I32(sum(c * s for c, s in zip(layout.reg_coords(r), strides)) * scale)
    for d, s in enumerate(strides):
        if layout.thread_runs(d):
            idx = b.add(idx, b.mul(em.thread_part(layout, d), I32(s * scale)))
    return idx


def _vector(layout: Layout, dtype: Scalar) -> int:
    """Registers moved per shared access: the run along the last axis, up to 16 bytes."""
    return max(1, min(layout.vector_run(), 16 // _slot_bytes(dtype)))


def _store_runs(em, base: lir.Value, layout: Layout, regs: list, dtype: Scalar) -> None:
    b = em.b
    vec, st = _vector(layout, dtype), _slot_type(dtype)
    for g in range(layout.nregs // vec):
        ptr = em.smem_ptr(b.add(base, _linear(em, layout, g * vec, _slot_bytes(dtype))))
        values = [_to_slot(b, regs[g * vec + i], dtype) for i in range(vec)]
        if vec == 1:
            b.store(values[0], ptr, align=_slot_bytes(dtype))
        else:
            v = lir.Constant(lir.VectorType(st, vec), lir.Undefined)
            for i, x in enumerate(values):
                v = b.insert_element(v, x, I32(i))
            b.store(v, ptr, align=vec * _slot_bytes(dtype))


def _load_runs(em, base: lir.Value, layout: Layout, dtype: Scalar) -> list:
    b = em.b
    vec, st = _vector(layout, dtype), _slot_type(dtype)
    out = []
    for g in range(layout.nregs // vec):
        ptr = em.smem_ptr(b.add(base, _linear(em, layout, g * vec, _slot_bytes(dtype))))
        if vec == 1:
            out.append(_from_slot(b, b.load(ptr, typ=st, align=_slot_bytes(dtype)), dtype))
        else:
            v = b.load(ptr, typ=lir.VectorType(st, vec), align=vec * _slot_bytes(dtype))
            out += [_from_slot(b, b.extract_element(v, I32(i)), dtype) for i in range(vec)]
    return out


def convert(em, val: TileVal, dst: Layout) -> TileVal:
    """The same tile in layout ``dst``."""
    if val.layout == dst:
        return val
    nbytes = _slot_bytes(val.dtype)
    for s in dst.shape:
        nbytes *= s
    base = I32(em.scratch(nbytes))
    barrier(em.b)
    _store_runs(em, base, val.layout, val.regs, val.dtype)
    barrier(em.b)
    return TileVal(dst, _load_runs(em, base, dst, val.dtype), val.dtype)


def broadcast(em, val: TileVal, target: Layout) -> TileVal:
    """A tile with size-1 axes repeated to ``target.shape``, in ``target`` (free once ``val`` is in
    ``target.broadcast_from(...)``, which only drops bits)."""
    src = target.broadcast_from(val.layout.shape)
    val = convert(em, val, src)
    return TileVal(target, [val.regs[m] for m in target.broadcast_reg_map(val.layout.shape)], val.dtype)


# ------------------------------------------------------------------ reductions
#
# A reduction carries a tuple through every step: ``(value,)``, or ``(value, index)`` for the
# index reductions (argmax, argmin), whose index is the element's position along the axis.


def combine(em, op: str, dtype: Scalar, a: lir.Value, c: lir.Value) -> lir.Value:
    """``a op c`` for the value reductions (sum, prod, max, min)."""
    b = em.b
    if dtype.is_float:
        if op in ("sum", "prod"):
            return b.fadd(a, c) if op == "sum" else b.fmul(a, c)
        return b.call(intrinsic(em.module, "llvm.maxnum" if op == "max" else "llvm.minnum", a.type, 2), [a, c])
    if op in ("sum", "prod"):
        return b.add(a, c) if op == "sum" else b.mul(a, c)
    signed = dtype.kind == "int"
    name = {"max": "llvm.smax" if signed else "llvm.umax", "min": "llvm.smin" if signed else "llvm.umin"}[op]
    return b.call(intrinsic(em.module, name, a.type, 2), [a, c])


def _prefers(em, op: str, dtype: Scalar, a: tuple, c: tuple) -> lir.Value:
    """Whether the pair ``c`` wins over ``a`` in an index reduction: a larger (argmax) or smaller
    (argmin) value, or an equal one at a lower index. NaN counts as beyond every number and equal
    to itself, so the first NaN wins (as NumPy's argmax and argmin): a total order, so every
    order of combining gives the same pair."""
    b = em.b
    (va, ia), (vc, ic) = a, c
    order = ">" if op == "argmax" else "<"
    lower = b.icmp_signed("<", ic, ia)
    if not dtype.is_float:
        beats = b.icmp_signed(order, vc, va) if dtype.kind == "int" else b.icmp_unsigned(order, vc, va)
        return b.or_(beats, b.and_(b.icmp_unsigned("==", vc, va), lower))
    nan_a, nan_c = b.fcmp_unordered("uno", va, va), b.fcmp_unordered("uno", vc, vc)
    beats = b.or_(b.fcmp_ordered(order, vc, va), b.and_(nan_c, b.not_(nan_a)))
    equal = b.or_(b.fcmp_ordered("==", vc, va), b.and_(nan_c, nan_a))
    return b.or_(beats, b.and_(equal, lower))


def _combine(em, op: str, dtype: Scalar, a: tuple, c: tuple) -> tuple:
    if op not in INDEX_REDUCTIONS:
        return (combine(em, op, dtype, a[0], c[0]),)
    take = _prefers(em, op, dtype, a, c)
    return tuple(em.b.select(take, y, x) for x, y in zip(a, c))


def _tree(em, op, dtype, values: list) -> tuple:
    # pairwise, in a fixed order: shorter dependency chains than a running sum, same result everywhere
    while len(values) > 1:
        values = [_combine(em, op, dtype, values[i], values[i + 1]) if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


def shuffle_xor(em, value: lir.Value, mask: int) -> lir.Value:
    """``shfl.sync.bfly``: the value of lane ``lane ^ mask`` (all 32 lanes take part)."""
    b = em.b
    t = value.type
    if t == F32T or t == I32:
        fn = declare(em.module, f"llvm.nvvm.shfl.sync.bfly.{'f32' if t == F32T else 'i32'}", t, [I32, t, I32, I32])
        return b.call(fn, [I32(-1), value, I32(mask), I32(31)])
    if isinstance(t, lir.IntType) and t.width < 32:      # i8/i16 lanes travel in a 32-bit register
        return b.trunc(shuffle_xor(em, b.zext(value, I32), mask), t)
    as_int = value if isinstance(t, lir.IntType) else b.bitcast(value, I64)
    lo, hi = b.trunc(as_int, I32), b.trunc(b.lshr(as_int, I64(32)), I32)
    lo, hi = shuffle_xor(em, lo, mask), shuffle_xor(em, hi, mask)
    joined = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), I64(32)))
    return joined if isinstance(t, lir.IntType) else b.bitcast(joined, t)


def _positions(em, layout: Layout, axis: int) -> list[lir.Value]:
    """Each register's coordinate along ``axis`` (i32): the index an index reduction carries."""
    part = em.thread_part(layout, axis) if layout.thread_runs(axis) else None
    coords = [I32(layout.reg_coords(r)[axis]) for r in range(layout.nregs)]
    return coords if part is None else [em.b.add(part, c) for c in coords]


def reduce(em, val: TileVal, axis: int, op: str) -> TileVal:
    """Combine ``val`` along ``axis``; the result is in ``val.layout.slice(axis)``, on every thread
    (for an index reduction, an i32 tile of the picked elements' positions along ``axis``)."""
    b = em.b
    layout, dtype = val.layout, val.dtype
    out_layout = layout.slice(axis)
    carried = [(v,) for v in val.regs]
    if op in INDEX_REDUCTIONS:
        carried = [(v, i) for v, i in zip(val.regs, _positions(em, layout, axis))]
    groups = [[] for _ in range(out_layout.nregs)]
    for r, o in enumerate(layout.slice_reg_map(axis)):
        groups[o].append(carried[r])
    partial = [_tree(em, op, dtype, g) for g in groups]
    for k, bit in enumerate(layout.thread[:5]):
        if bit is not None and bit[0] == axis:
            partial = [_combine(em, op, dtype, p, tuple(shuffle_xor(em, x, 1 << k) for x in p)) for p in partial]
    warp_bits = [k for k in range(5, len(layout.thread)) if layout.thread[k] is not None and layout.thread[k][0] == axis]
    if warp_bits:
        partial = _across_warps(em, out_layout, partial, warp_bits, op, dtype)
    if op in INDEX_REDUCTIONS:
        return TileVal(out_layout, [p[1] for p in partial], INDEX_DTYPE)
    values = [p[0] for p in partial]
    if dtype.is_float:
        values = [round_half(b, v, dtype) for v in values]
    return TileVal(out_layout, values, dtype)


def _across_warps(em, out_layout: Layout, partial: list, warp_bits: list[int], op: str, dtype: Scalar) -> list:
    """Each warp's partial results through shared memory: slot (element, warp part) -> combined in
    order. Each carried component has an area of its own, one after the other, in one exchange."""
    b = em.b
    parts = 1 << len(warp_bits)
    elements = 1
    for s in out_layout.shape:
        elements *= s
    sizes = [_bytes_of(x.type) for x in partial[0]]
    areas, nbytes = [], 0
    for size in sizes:
        areas.append(nbytes)
        nbytes += -(-elements * parts * size // 16) * 16
    scratch = em.scratch(nbytes)
    which = I32(0)
    for j, k in enumerate(warp_bits):
        which = b.or_(which, b.shl(b.and_(b.lshr(em.tid, I32(k)), I32(1)), I32(j)))
    barrier(b)
    for o, p in enumerate(partial):
        slot = b.add(b.mul(_linear(em, out_layout, o), I32(parts)), which)
        for x, area, size in zip(p, areas, sizes):
            b.store(x, em.smem_ptr(b.add(I32(scratch + area), b.mul(slot, I32(size)))), align=size)
    barrier(b)
    out = []
    for o, p in enumerate(partial):
        first = b.mul(_linear(em, out_layout, o), I32(parts))
        values = [tuple(b.load(em.smem_ptr(b.add(I32(scratch + area), b.mul(b.add(first, I32(j)), I32(size)))),
                               typ=x.type, align=size) for x, area, size in zip(p, areas, sizes))
                  for j in range(parts)]
        out.append(_tree(em, op, dtype, values))
    return out


__all__ = ["TileVal", "broadcast", "combine", "convert", "reduce", "shuffle_xor"]
