"""Global memory: a tile read from an input or written to an output, in any layout.

Each access chooses its path once per block, at run time, from the
arguments (a uniform branch):

* **fast** -- the tile lies wholly inside the array and, when the layout
  gives a thread runs of consecutive elements, the innermost axis is
  contiguous and every run's address is aligned: unmasked vector accesses
  of up to 16 bytes (``ld.global.nc.v4.f32`` / ``st.global.v4.f32``).
* **masked** -- anywhere else (a ragged edge, a strided or misaligned view):
  one predicated scalar access per element; a load outside the array reads
  the padding value, a store outside it is skipped.
"""

from __future__ import annotations

import llvmlite.ir as lir

from buildtile.backends.common.llvm import (
    I1,
    I16,
    I32,
    I64,
    asm,
    asm_reg,
    const_of,
    from_asm_operand,
    F32T,
    from_memory,
    mem_type,
    to_asm_operand,
    to_memory,
)
from buildtile.backends.tile.layout import access_vector
from buildtile.backends.tile.types import BF16, Scalar, elem_bytes

_PTX_TYPE = {8: "u8", 16: "b16", 32: "b32", 64: "b64"}
_REG_BITS = {"h": 16, "r": 32, "l": 64}


def vector_width(layout, dtype: Scalar) -> int:
    """Elements per vector access (see :func:`~.layout.access_vector`)."""
    return access_vector(layout, elem_bytes(dtype))


def tile_inside(em, arr, origin: list[lir.Value], shape: tuple[int, ...]) -> lir.Value:
    b = em.b
    ok = None
    for o, n, extent in zip(origin, shape, arr.shape):
        here = b.and_(b.icmp_signed(">=", o, I64(0)), b.icmp_signed("<=", b.add(o, I64(n)), extent))
        ok = here if ok is None else b.and_(ok, here)
    return ok if ok is not None else I1(1)


def contiguous_aligned(em, arr, vec_bytes: int) -> lir.Value:
    """Innermost stride 1, and the data pointer and outer strides aligned to ``vec_bytes``."""
    b = em.b
    eb = elem_bytes(arr.elem)
    ok = b.icmp_signed("==", arr.strides[-1], I64(1))
    bits = b.ptrtoint(arr.data, I64)
    for stride in arr.strides[:-1]:
        bits = b.or_(bits, b.mul(stride, I64(eb)))
    aligned = b.icmp_unsigned("==", b.and_(bits, I64(vec_bytes - 1)), I64(0))
    return b.and_(ok, aligned)


def element_coords(em, layout, origin: list[lir.Value], r: int, parts: list[lir.Value] | None = None) -> list[lir.Value]:
    """Coordinates of register ``r``'s element; ``parts`` replaces the thread parts (see :func:`pinned_parts`)."""
    consts = layout.reg_coords(r)
    parts = parts or [em.thread_part(layout, d) for d in range(layout.rank)]
    return [em.b.add(o, em.b.add(em.b.zext(p, I64), I64(c))) for o, p, c in zip(origin, parts, consts)]


def pinned_parts(em, layout) -> list[lir.Value]:
    """The thread parts of the coordinates, pinned where the masked path starts.

    Every element of the masked path has its own address and bounds tests; computed from the
    entry block's thread parts, LLVM would hoist all of them out of an enclosing loop (they do
    not change there) and hold each in registers through the loop, although the path rarely
    runs. An opaque copy keeps them inside the path.
    """
    return [asm(em.b, I32, "mov.b32 $0, $1;", "=r,r", [em.thread_part(layout, d)], side_effect=True)
            for d in range(layout.rank)]


def element_address(em, arr, coords: list[lir.Value], unit_inner: bool) -> lir.Value:
    """``data + sum(coords * strides)``; with ``unit_inner`` the innermost stride is known to be 1."""
    b = em.b
    offset = None
    for d, (c, stride) in enumerate(zip(coords, arr.strides)):
        term = c if unit_inner and d == len(coords) - 1 else b.mul(c, stride)
        offset = term if offset is None else b.add(offset, term)
    return b.gep(arr.data, [offset], source_etype=mem_type(arr.elem))


def in_bounds(em, arr, coords: list[lir.Value]) -> lir.Value:
    b = em.b
    ok = None
    for c, extent in zip(coords, arr.shape):
        here = b.icmp_unsigned("<", c, extent)   # unsigned: a negative coordinate is outside too
        ok = here if ok is None else b.and_(ok, here)
    return ok if ok is not None else I1(1)


def load_tile(em, arr, origin: list[lir.Value], layout, padding) -> list[lir.Value]:
    """The registers of a tile of ``arr`` starting at element ``origin``, in ``layout``."""
    b = em.b
    dtype = arr.elem
    vec = vector_width(layout, dtype)
    fast = tile_inside(em, arr, origin, layout.shape)
    if vec > 1:
        fast = b.and_(fast, contiguous_aligned(em, arr, vec * elem_bytes(dtype)))
    fast_bb, slow_bb, done_bb = (em.fn.append_basic_block(n) for n in ("load.fast", "load.masked", "load.end"))
    b.cbranch(fast, fast_bb, slow_bb)

    b.position_at_end(fast_bb)
    fast_regs = []
    mt = mem_type(dtype)
    for g in range(layout.nregs // vec):
        ptr = element_address(em, arr, element_coords(em, layout, origin, g * vec), unit_inner=vec > 1)
        if vec > 1 and dtype == BF16:
            fast_regs += bf16_words_to_regs(b, vector_load_words(em, ptr, vec * elem_bytes(dtype) // 4))
        elif vec > 1:
            fast_regs += [from_memory(b, v, dtype) for v in vector_load(em, ptr, dtype, vec)]
        else:
            raw = b.load(ptr, typ=mt, align=elem_bytes(dtype))
            em.mark_invariant(raw)
            fast_regs.append(from_memory(b, raw, dtype))
    fast_end = b.block
    b.branch(done_bb)

    b.position_at_end(slow_bb)
    pad = const_of(dtype, padding)
    slow_regs = []
    parts = pinned_parts(em, layout)
    for r in range(layout.nregs):
        coords = element_coords(em, layout, origin, r, parts)
        ok = in_bounds(em, arr, coords)
        value = predicated_load(em, element_address(em, arr, coords, unit_inner=False), ok, dtype)
        slow_regs.append(b.select(ok, value, pad))
    slow_end = b.block
    b.branch(done_bb)

    b.position_at_end(done_bb)
    out = []
    for f, s in zip(fast_regs, slow_regs):
        phi = b.phi(f.type)
        phi.add_incoming(f, fast_end)
        phi.add_incoming(s, slow_end)
        out.append(phi)
    return out


def vector_load(em, ptr: lir.Value, dtype: Scalar, vec: int) -> list[lir.Value]:
    """``vec`` consecutive elements (4 to 16 bytes, aligned) through the non-coherent path."""
    b = em.b
    words = vector_load_words(em, ptr, vec * elem_bytes(dtype) // 4)
    packed = lir.Constant(lir.VectorType(I32, len(words)), lir.Undefined)
    for k, word in enumerate(words):
        packed = b.insert_element(packed, word, I32(k))
    elements = b.bitcast(packed, lir.VectorType(mem_type(dtype), vec))
    return [b.extract_element(elements, I32(i)) for i in range(vec)]


def vector_load_words(em, ptr: lir.Value, words: int) -> list[lir.Value]:
    """``words`` consecutive 32-bit words (aligned) through the non-coherent path.

    Written as inline PTX: LLVM would split a vector load whose elements are all used into
    scalar loads and drop the invariance that lets it use ``ld.global.nc``.
    """
    b = em.b
    outs = ", ".join(f"${k}" for k in range(words))
    shape = f".v{words}" if words > 1 else ""
    ret = lir.LiteralStructType([I32] * words) if words > 1 else I32
    raw = asm(b, ret, f"ld.global.nc{shape}.b32 {{{outs}}}, [${words}];" if words > 1
              else "ld.global.nc.b32 $0, [$1];", ",".join(["=r"] * words) + ",l", [b.ptrtoint(ptr, I64)])
    return [b.extract_value(raw, k) for k in range(words)] if words > 1 else [raw]


def bf16_words_to_regs(b: lir.IRBuilder, words: list[lir.Value]) -> list[lir.Value]:
    """The f32 registers of the bf16 pairs in ``words`` (the first element in the low half): one
    shift or mask each, where widening each 16-bit element on its own takes two instructions."""
    regs = []
    for word in words:
        regs.append(b.bitcast(b.shl(word, I32(16)), F32T))
        regs.append(b.bitcast(b.and_(word, I32(0xFFFF0000 - (1 << 32))), F32T))
    return regs


def round_bf16(b: lir.IRBuilder, regs: list[lir.Value]) -> list[lir.Value]:
    """f32 registers (an even number) rounded to bf16 precision, still f32 registers."""
    return bf16_words_to_regs(b, bf16_pairs(b, regs))


def bf16_pairs(b: lir.IRBuilder, regs: list[lir.Value]) -> list[lir.Value]:
    """f32 registers rounded to bf16 two at a time into 32-bit words (the first element in the
    low half): one ``cvt.rn.bf16x2.f32`` a pair (sm_80 and newer, as every Tile target), where
    rounding in integer arithmetic takes six instructions an element."""
    return [asm(b, I32, "cvt.rn.bf16x2.f32 $0, $1, $2;", "=r,f,f", [hi, lo])
            for lo, hi in zip(regs[0::2], regs[1::2])]


def predicated_load(em, ptr: lir.Value, pred: lir.Value, dtype: Scalar) -> lir.Value:
    """One element, read only where ``pred`` holds (no branch: a predicated ``ld.global.nc``)."""
    b = em.b
    letter, bits, operand = asm_reg(dtype)
    text = (f"{{ .reg .pred p; setp.ne.b32 p, $2, 0; mov.b{_REG_BITS[letter]} $0, 0; "
            f"@p ld.global.nc.{_PTX_TYPE[bits]} $0, [$1]; }}")
    raw = asm(b, operand, text, f"={letter},l,r", [b.ptrtoint(ptr, I64), b.zext(pred, I32)])
    return from_memory(b, from_asm_operand(b, raw, dtype), dtype)


def store_tile(em, arr, origin: list[lir.Value], layout, regs: list[lir.Value]) -> None:
    """Write a tile held in ``layout`` at element ``origin`` of ``arr``; elements outside are skipped."""
    b = em.b
    dtype = arr.elem
    vec = vector_width(layout, dtype)
    words = bf16_pairs(b, regs) if dtype == BF16 and len(regs) % 2 == 0 else None
    if words is not None:
        mem = [half for w in words for half in (b.trunc(w, I16), b.trunc(b.lshr(w, I32(16)), I16))]
    else:
        mem = [to_memory(b, r, dtype) for r in regs]
    owner = em.owner(layout)      # replicated layouts: one copy of each element stores
    fast = tile_inside(em, arr, origin, layout.shape)
    if vec > 1:
        fast = b.and_(fast, contiguous_aligned(em, arr, vec * elem_bytes(dtype)))
    if owner is not None:
        fast = b.and_(fast, owner)
    fast_bb, slow_bb, done_bb = (em.fn.append_basic_block(n) for n in ("store.fast", "store.masked", "store.end"))
    b.cbranch(fast, fast_bb, slow_bb)

    b.position_at_end(fast_bb)
    mt = mem_type(dtype)
    for g in range(layout.nregs // vec):
        ptr = element_address(em, arr, element_coords(em, layout, origin, g * vec), unit_inner=vec > 1)
        if vec > 1 and words is not None:
            v = lir.Constant(lir.VectorType(I32, vec // 2), lir.Undefined)
            for i in range(vec // 2):
                v = b.insert_element(v, words[g * vec // 2 + i], I32(i))
            b.store(v, ptr, align=vec * elem_bytes(dtype))
        elif vec > 1:
            v = lir.Constant(lir.VectorType(mt, vec), lir.Undefined)
            for i in range(vec):
                v = b.insert_element(v, mem[g * vec + i], I32(i))
            b.store(v, ptr, align=vec * elem_bytes(dtype))
        else:
            b.store(mem[g], ptr, align=elem_bytes(dtype))
    b.branch(done_bb)

    b.position_at_end(slow_bb)
    letter, bits, _ = asm_reg(dtype)
    text = f"{{ .reg .pred p; setp.ne.b32 p, $2, 0; @p st.global.{_PTX_TYPE[bits]} [$0], $1; }}"
    parts = pinned_parts(em, layout)
    for r in range(layout.nregs):
        coords = element_coords(em, layout, origin, r, parts)
        ok = in_bounds(em, arr, coords)
        if owner is not None:
            ok = b.and_(ok, owner)
        ptr = element_address(em, arr, coords, unit_inner=False)
        asm(b, lir.VoidType(), text, f"l,{letter},r",
            [b.ptrtoint(ptr, I64), to_asm_operand(b, mem[r], dtype), b.zext(ok, I32)], side_effect=True)
    b.branch(done_bb)
    b.position_at_end(done_bb)
