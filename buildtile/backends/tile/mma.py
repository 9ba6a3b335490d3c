"""``tile.mma`` on tensor cores: ``ldmatrix`` + ``mma.sync.m16n8k16`` (sm_80+), fed by ``cp.async``.

Operands reach the tensor cores through shared memory, stored row-major
as loaded in 16-byte chunks whose position in a row is XOR-swizzled by the
row (:func:`swizzle_offset`), so that the eight rows one ``ldmatrix`` phase
reads fall in eight different bank groups. An A operand stored as M x K is
read with ``ldmatrix.x4`` (one 16 x 16 fragment), a B operand stored as
K x N with ``ldmatrix.x4.trans`` (two 16 x 8 fragments, transposed into the
"col" operand); an operand that is the transpose of the stored tile
(``tile.mma(q, k.T, acc)``) takes the other form of ``ldmatrix``, so it is
never transposed in memory. The accumulator stays in registers in
:func:`~.layout.mma_accumulator`'s layout, which is the m16n8k16 C/D
fragment layout.

An operand gets to shared memory one of three ways (see ``mma_operands``):

* loaded in a pipelined ``tile.range`` loop (see ``plan.find_pipelines``):
  ``cp.async`` copies it from global memory, ``stages - 1`` iterations ahead,
  into a ring of stage buffers (zero-filling past the array's edge); a
  misaligned or strided array takes predicated loads and shared stores
  instead, in the same schedule;
* loaded once outside the loops that use it (resident): copied the same way
  into shared memory of its own where it is assigned;
* any other tile: its registers are stored into a scratch buffer first.

An A operand already in registers in the layout of A fragments
(:func:`~.layout.mma_a_layout`: a value computed elementwise from an
accumulator of whole rows a warp) goes to the tensor cores from there.
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as lir

from buildtile.backends.common.entry import ArrayArg
from buildtile.backends.common.llvm import (
    F32T,
    GLOBAL_PTR,
    HALF,
    I16,
    I32,
    I64,
    SHARED_PTR,
    VOID,
    asm,
    barrier,
    declare,
    to_memory,
)
from buildtile.backends.tile import ir
from buildtile.backends.tile.exchange import TileVal
from buildtile.backends.tile.layout import MmaShape, log2, mma_a_layout, mma_reg, mma_shape
from buildtile.backends.tile.loops import counted, trip_count
from buildtile.backends.tile.memory import bf16_pairs, contiguous_aligned, predicated_load
from buildtile.backends.tile.mma_operands import OPERAND_ALIGN, operand_local, pow2_divisor
from buildtile.backends.tile.types import BF16, F16, Scalar

CHUNK = 16      # bytes: one ldmatrix row, one cp.async copy, one swizzle unit


@dataclass
class SmemTile:
    """An f16/bf16 tile in shared memory: ``rows`` x ``cols``, row-major, swizzled; an operand
    that is ``transposed`` is the transpose of that stored tile."""

    offset: lir.Value        # i32 byte offset in the kernel's shared memory
    rows: int
    cols: int
    transposed: bool = False
    align: int = 128         # a power of two that divides ``offset``

    @property
    def row_bytes(self) -> int:
        return self.cols * 2

    def transpose(self) -> SmemTile:
        return SmemTile(self.offset, self.rows, self.cols, not self.transposed, self.align)


def swizzle_offset(row_bytes: int, row: int, chunk: int) -> int:
    """Byte offset of 16-byte ``chunk`` of ``row``: rows of 128 bytes or more XOR the chunk with
    ``row % 8``; shorter rows share a 128-byte line and XOR with the line number instead."""
    return row * row_bytes + (chunk ^ _swizzle_key(row_bytes, row)) * CHUNK


def _swizzle_key(row_bytes: int, row: int) -> int:
    chunks = row_bytes // CHUNK
    if chunks >= 8:
        return row & 7
    if chunks > 1:
        return (row >> log2(8 // chunks)) & (chunks - 1)
    return 0


def _swizzled(b: lir.IRBuilder, row_bytes: int, row: lir.Value, chunk: lir.Value) -> lir.Value:
    """:func:`swizzle_offset` in i32 LLVM arithmetic."""
    chunks = row_bytes // CHUNK
    if chunks >= 8:
        key = b.and_(row, I32(7))
    elif chunks > 1:
        key = b.and_(b.lshr(row, I32(log2(8 // chunks))), I32(chunks - 1))
    else:
        key = I32(0)
    return b.add(b.mul(row, I32(row_bytes)), b.shl(b.xor(chunk, key), I32(4)))


# ------------------------------------------------------------------ the multiply


def emit_mma(em, e: ir.Mma) -> TileVal:
    m, n = e.ty.shape
    k = e.a.ty.shape[1]
    s = mma_shape(m, n, em.plan.threads, em.plan.mma_rows_only)
    acc = em.tile_in(e.acc, e.layout)
    dtype = e.a.ty.dtype
    a, bt = _smem_operand(em, e.a), _smem_operand(em, e.b)
    if a is None and e.a.layout == mma_a_layout(s, k):
        a = register_fragments(em, em.tile(e.a), s, k)
    if a is None or bt is None:
        a_bytes = 0 if a is not None else _align(m * k * 2)
        scratch = em.scratch(a_bytes + (0 if bt is not None else _align(k * n * 2)))
        a_val = None if a is not None else em.tile(e.a)
        b_val = None if bt is not None else em.tile(e.b)
        barrier(em.b)
        if a is None:
            a = SmemTile(I32(scratch), m, k, align=pow2_divisor(scratch))
            stage_registers(em, a_val, a)
        if bt is None:
            bt = SmemTile(I32(scratch + a_bytes), k, n, align=pow2_divisor(scratch + a_bytes))
            stage_registers(em, b_val, bt)
        barrier(em.b)
    regs = multiply(em, s, a, bt, list(acc.regs), dtype, k)
    return TileVal(e.layout, regs, acc.dtype)


def _smem_operand(em, operand: ir.Expr) -> SmemTile | None:
    """The shared-memory tile an operand reads (a pipelined or resident local, or its transpose)."""
    local = operand_local(operand)
    tile = em.smem_operands.get(local[0]) if local is not None else None
    if tile is None:
        return None
    return tile.transpose() if local[1] else tile


def register_fragments(em, val: TileVal, s: MmaShape, k: int) -> list[list[list[lir.Value]]]:
    """The A fragments (``[fm][ks]``: four 32-bit words each) of a tile held in
    :func:`~.layout.mma_a_layout`: its registers, rounded to the operand type in pairs."""
    layout = val.layout
    frags = []
    for fm in range(s.frags_m):
        row = []
        for ks in range(k // 16):
            # a0a1: (g, 2t..), a2a3: (g + 8, 2t..), a4a5: (g, 2t + 8..), a6a7: (g + 8, 2t + 8..)
            firsts = [layout.reg_index((fm * 16 + 8 * (w & 1), ks * 16 + 8 * (w >> 1))) for w in range(4)]
            row.append([_pack_pair(em, val.dtype, val.regs[r], val.regs[r + 1]) for r in firsts])
        frags.append(row)
    return frags


def _pack_pair(em, dtype: Scalar, lo: lir.Value, hi: lir.Value) -> lir.Value:
    """Two f32 registers as one 32-bit word of two f16/bf16 (``lo`` in the low half)."""
    b = em.b
    if dtype == BF16:
        return bf16_pairs(b, [lo, hi])[0]
    pair = lir.Constant(lir.VectorType(HALF, 2), lir.Undefined)
    pair = b.insert_element(pair, b.fptrunc(lo, HALF), I32(0))
    pair = b.insert_element(pair, b.fptrunc(hi, HALF), I32(1))
    return b.bitcast(pair, I32)


def _align(n: int) -> int:
    return (n + OPERAND_ALIGN - 1) // OPERAND_ALIGN * OPERAND_ALIGN


def multiply(em, s: MmaShape, a: SmemTile | list, bt: SmemTile, acc: list, dtype: Scalar, k: int) -> list:
    """``acc += a @ b`` for this warp's part of the accumulator; ``a`` is a shared-memory tile or
    the A fragments of :func:`register_fragments`."""
    b = em.b
    lane = b.and_(em.tid, I32(31))
    warp = b.lshr(em.tid, I32(5))
    wc = b.and_(warp, I32(s.warps_n - 1))
    wr = b.and_(b.lshr(warp, I32(log2(s.warps_n))), I32(s.warps_m - 1))
    row_base = b.mul(wr, I32(s.warp_m))
    col_base = b.mul(wc, I32(s.warp_n))
    # ldmatrix.x4: lanes 8i..8i+7 address the rows of matrix i (see _fragment)
    low, high = b.and_(b.lshr(lane, I32(3)), I32(1)), b.lshr(lane, I32(4))     # bits 0 and 1 of i
    lane_row = b.and_(lane, I32(7))
    # matrix i of an A block holds rows +8*(i&1), columns (k) +8*(i>>1): a0a1, a2a3, a4a5, a6a7.
    # B is read through its transpose (N x K, rows n): matrix i holds k +8*(i&1), n +8*(i>>1), so
    # d[0], d[1] are the two halves of the 16 x 8 fragment of columns fp*16.., d[2], d[3] those of
    # the next 8 columns
    a_blocks = _Fragments(em, a, row_base, lane_row, low, high) if isinstance(a, SmemTile) else None
    b_blocks = _Fragments(em, bt.transpose(), col_base, lane_row, high, low)
    for ks in range(k // 16):
        a_frags = [a[fm][ks] if a_blocks is None else a_blocks.block(fm * 16, ks * 16) for fm in range(s.frags_m)]
        b_frags = []
        for fp in range(s.frags_n // 2):
            d = b_blocks.block(fp * 16, ks * 16)
            b_frags += [(d[0], d[1]), (d[2], d[3])]
        for fm in range(s.frags_m):
            for fn in range(s.frags_n):
                idx = [mma_reg(s, fm, fn, c) for c in range(4)]
                out = _mma_sync(em, dtype, a_frags[fm], b_frags[fn], [acc[i] for i in idx])
                for i, v in zip(idx, out):
                    acc[i] = v
    return acc


class _Fragments:
    """``ldmatrix.x4`` of the 16 x 16 blocks of the operand ``tile`` stands for, each as four 8 x 8
    matrices: the lanes of matrix i address its half along the outer axis by ``outer_half`` (a
    bit of i) and along the inner one by ``inner_half``; each thread receives row ``lane / 4``,
    columns ``2 * (lane % 4)`` and the next of each matrix, as the m16n8k16 A fragment holds them.

    A tile stored as the operand is (not transposed): lane ``8i + r`` addresses stored row
    ``outer + r`` of matrix i, read as it is. Stored transposed: it addresses stored row
    ``inner + r``, and ``.trans`` transposes each matrix on the way.

    Blocks lie at multiples of 16 rows and 2 chunks from this warp's first (``outer_warp``), so
    the swizzle key of a lane's row is the same in every block, and a block's chunk differs from
    the first block's only in bits that chunk does not have: its address is the lane's address in
    the first block XOR the chunk offset, plus the row offset. Each block then costs two integer
    operations on one base, computed in the loop from the tile's offset (LLVM would otherwise
    keep every block's address live across the loop, as loop invariants). That needs the tile's
    offset to be a multiple of its row length (operands are aligned so)."""

    def __init__(self, em, tile: SmemTile, outer_warp: lir.Value, lane_row: lir.Value,
                 outer_half: lir.Value, inner_half: lir.Value) -> None:
        b = em.b
        self.em, self.tile = em, tile
        if not tile.transposed:
            row, chunk = b.add(outer_warp, b.add(lane_row, b.shl(outer_half, I32(3)))), inner_half
        else:
            row = b.add(lane_row, b.shl(inner_half, I32(3)))
            chunk = b.add(b.lshr(outer_warp, I32(3)), outer_half)
        self.rows, self.chunks = row, chunk
        self.base = None
        if tile.align % tile.row_bytes == 0:
            # pinned: a tile at a constant offset would make every block's address a loop invariant
            first = b.add(tile.offset, _swizzled(b, tile.row_bytes, row, chunk))
            self.base = asm(b, I32, "mov.b32 $0, $1;", "=r,r", [first], side_effect=True)

    def block(self, outer: int, inner: int) -> list[lir.Value]:
        b, tile = self.em.b, self.tile
        row_step, chunk_step = (outer, inner // 8) if not tile.transposed else (inner, outer // 8)
        if self.base is not None:
            address = b.add(b.xor(self.base, I32(chunk_step * CHUNK)), I32(row_step * tile.row_bytes))
        else:
            swizzled = _swizzled(b, tile.row_bytes, b.add(self.rows, I32(row_step)),
                                 b.add(self.chunks, I32(chunk_step)))
            address = b.add(tile.offset, swizzled)
        return _ldmatrix(self.em, address, trans=tile.transposed)


def _ldmatrix(em, offset: lir.Value, trans: bool) -> list[lir.Value]:
    b = em.b
    name = f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4{'.trans' if trans else ''}.b16"
    ret = lir.LiteralStructType([I32] * 4)
    result = b.call(declare(em.module, name, ret, [SHARED_PTR]), [em.smem_ptr(offset)])
    return [b.extract_value(result, i) for i in range(4)]


def _mma_sync(em, dtype: Scalar, a: list, bfrag: tuple, c: list) -> list:
    b = em.b
    ret = lir.LiteralStructType([F32T] * 4)
    if dtype == BF16:
        fn = declare(em.module, "llvm.nvvm.mma.m16n8k16.row.col.bf16", ret, [I32] * 6 + [F32T] * 4)
        args = list(a) + list(bfrag) + c
    else:
        assert dtype == F16
        pair = lir.VectorType(HALF, 2)
        fn = declare(em.module, "llvm.nvvm.mma.m16n8k16.row.col.f32.f32", ret, [pair] * 6 + [F32T] * 4)
        args = [b.bitcast(x, pair) for x in list(a) + list(bfrag)] + c
    result = b.call(fn, args)
    return [b.extract_value(result, i) for i in range(4)]


def stage_registers(em, val: TileVal, tile: SmemTile) -> None:
    """Store a register tile into the swizzled operand format (up to 16 bytes per access)."""
    b = em.b
    layout = val.layout
    vec = min(layout.vector_run(), 8)
    for g in range(layout.nregs // vec):
        r0 = g * vec
        consts = layout.reg_coords(r0)
        row = b.add(em.thread_part(layout, 0), I32(consts[0]))
        col = b.add(em.thread_part(layout, 1), I32(consts[1]))
        offset = b.add(tile.offset, b.add(_swizzled(b, tile.row_bytes, row, b.lshr(col, I32(3))),
                                          b.shl(b.and_(col, I32(7)), I32(1))))
        halves = [b.bitcast(to_memory(b, val.regs[r0 + i], val.dtype), I16) if val.dtype == F16
                  else to_memory(b, val.regs[r0 + i], val.dtype) for i in range(vec)]
        if vec == 1:
            b.store(halves[0], em.smem_ptr(offset), align=2)
        else:
            v = lir.Constant(lir.VectorType(I16, vec), lir.Undefined)
            for i, h in enumerate(halves):
                v = b.insert_element(v, h, I32(i))
            b.store(v, em.smem_ptr(offset), align=2 * vec)


# ------------------------------------------------------------------ the software pipeline


def emit_pipelined_loop(em, pipe) -> None:
    """A ``tile.range`` loop whose mma operands are copied ``stages - 1`` iterations ahead.

    Iteration ``it`` waits for its own copies (``cp.async.wait_group stages-2``), then a barrier
    publishes them to all threads and also proves every thread is done with the stage that the
    copies for iteration ``it + stages - 1`` overwrite next.

    The loop is emitted twice, chosen once per block: one where every operand takes ``cp.async``
    and one for misaligned or strided operands. The hot version then holds no call to the cold
    masked copy: a call inside the loop makes ptxas save and reload live registers around it
    (local-memory traffic in every iteration, although the call never runs).
    """
    b = em.b
    fast = {op.name: contiguous_aligned(em, em.arrays[op.load.param], CHUNK) for op in pipe.operands}
    all_fast = None
    for flag in fast.values():
        all_fast = flag if all_fast is None else b.and_(all_fast, flag)
    with b.if_else(all_fast, likely=True) as (then, otherwise):
        with then:
            _emit_pipeline(em, pipe, {name: None for name in fast})
        with otherwise:
            _emit_pipeline(em, pipe, fast)


def _emit_pipeline(em, pipe, fast: dict) -> None:
    """One version of the pipelined loop; ``fast[name]`` is None where that operand always takes
    ``cp.async``, else the run-time test choosing between ``cp.async`` and the masked copy."""
    b = em.b
    loop = pipe.loop
    stages = pipe.stages
    start, trips = trip_count(em, loop)

    def issue(j: lir.Value, stage: lir.Value) -> None:
        em.overrides[loop.var] = b.add(start, b.mul(j, I64(loop.step)))
        try:
            for op in pipe.operands:
                dst = b.add(b.mul(stage, I32(pipe.stage_bytes)), I32(op.offset))
                copy_operand(em, op.load, op.rows, op.cols, dst, fast[op.name])
        finally:
            del em.overrides[loop.var]

    for s in range(stages - 1):
        with b.if_then(b.icmp_signed("<", I64(s), trips)):
            issue(I64(s), I32(s))
        _commit(em)

    with counted(em, trips, "pipeline") as it:
        _wait(em, stages - 2)
        barrier(b)
        ahead = b.add(it, I64(stages - 1))
        with b.if_then(b.icmp_signed("<", ahead, trips)):
            issue(ahead, b.trunc(b.urem(ahead, I64(stages)), I32))
        _commit(em)
        stage = b.trunc(b.urem(it, I64(stages)), I32)
        for op in pipe.operands:
            offset = b.add(b.mul(stage, I32(pipe.stage_bytes)), I32(op.offset))
            em.smem_operands[op.name] = SmemTile(offset, op.rows, op.cols,
                                                 align=min(pow2_divisor(pipe.stage_bytes), pow2_divisor(op.offset)))
        b.store(b.add(start, b.mul(it, I64(loop.step))), em.scalar_slot(loop.var))
        em.stmts([s for s in loop.body if not (isinstance(s, ir.Assign) and s.name in pipe.names)])
    for op in pipe.operands:
        em.smem_operands.pop(op.name, None)
    _wait(em, 0)
    barrier(b)


def stage_resident(em, operand) -> None:
    """Copy a resident operand (``mma_operands.SmemOperand``) into its shared memory, where
    it is assigned, for every mma that reads it from there."""
    b = em.b
    offset = em.resident_base + operand.offset
    dst = I32(offset)
    barrier(b)      # a block's previous tile may still read it
    copy_operand(em, operand.load, operand.rows, operand.cols, dst,
                 contiguous_aligned(em, em.arrays[operand.load.param], CHUNK))
    _commit(em)
    _wait(em, 0)
    barrier(b)
    em.smem_operands[operand.name] = SmemTile(dst, operand.rows, operand.cols, align=pow2_divisor(offset))


def copy_operand(em, load: ir.Load, rows: int, cols: int, dst: lir.Value, fast: lir.Value | None) -> None:
    """Copy the tile ``load`` reads (its last two axes) into the shared-memory operand at ``dst``."""
    b = em.b
    index = [em.scalar(i) for i in load.index]
    origin = [b.mul(i, I64(t)) for i, t in zip(index, load.ty.shape)]
    view = _plane(em, em.arrays[load.param], origin[:-2])
    _copy_tile(em, view, origin[-2:], rows, cols, dst, fast)


def _plane(em, arr: ArrayArg, lead: list[lir.Value]) -> ArrayArg:
    """The 2-D view of ``arr`` at coordinates ``lead`` of its leading axes (its last two axes); a
    plane outside the array has no rows (so every element of a copy from it reads zero)."""
    if not lead:
        return arr
    b = em.b
    inside, offset = None, I64(0)
    for c, extent, stride in zip(lead, arr.shape, arr.strides):
        here = b.icmp_unsigned("<", c, extent)
        inside = here if inside is None else b.and_(inside, here)
        offset = b.add(offset, b.mul(c, stride))
    data = b.gep(arr.data, [b.select(inside, offset, I64(0))], source_etype=I16)
    rows = b.select(inside, arr.shape[-2], I64(0))
    return ArrayArg(data, [rows, arr.shape[-1]], list(arr.strides[-2:]), arr.elem)


def _commit(em) -> None:
    em.b.call(declare(em.module, "llvm.nvvm.cp.async.commit.group", VOID, []), [])


def _wait(em, pending: int) -> None:
    em.b.call(declare(em.module, "llvm.nvvm.cp.async.wait.group", VOID, [I32]), [I32(pending)])


def _copy_tile(em, arr, origin: list, rows: int, cols: int, dst: lir.Value, fast: lir.Value | None) -> None:
    """Copy the ``rows`` x ``cols`` tile at ``origin`` of ``arr`` into the stage at byte ``dst``,
    16 bytes per thread per step; elements past the array's edge become zeros. ``fast`` None:
    the array is known contiguous and aligned, only ``cp.async`` is emitted."""
    b = em.b
    threads = em.plan.threads
    per_row = cols // 8
    total = rows * per_row
    if fast is None:
        _copy_chunks(em, arr, origin, per_row, total, threads, dst, cols, async_copy=True)
        return
    with b.if_else(fast, likely=True) as (then, otherwise):
        with then:
            _copy_chunks(em, arr, origin, per_row, total, threads, dst, cols, async_copy=True)
        with otherwise:
            b.call(_masked_copy(em, arr.elem, rows, cols),
                   [arr.data, *arr.shape, *arr.strides, *origin, dst])


def _masked_copy(em, dtype: Scalar, rows: int, cols: int) -> lir.Function:
    """The copy for misaligned or strided arrays, as a cold device function (made once per shape)."""
    key = ("masked_copy", dtype, rows, cols)
    if key not in em.helpers:
        with em.device_function(f"copy_masked_{dtype}_{rows}x{cols}", [GLOBAL_PTR] + [I64] * 6 + [I32]) as fn:
            data, shape0, shape1, stride0, stride1, origin0, origin1, dst = fn.args
            view = ArrayArg(data, [shape0, shape1], [stride0, stride1], dtype)
            per_row = cols // 8
            _copy_chunks(em, view, [origin0, origin1], per_row, rows * per_row, em.plan.threads, dst, cols,
                         async_copy=False)
        em.helpers[key] = fn
    return em.helpers[key]


def _copy_chunks(em, arr, origin, per_row: int, total: int, threads: int, dst, cols: int, async_copy: bool) -> None:
    b = em.b
    steps = (total + threads - 1) // threads
    rows_per_step = threads // per_row
    if async_copy and total % threads == 0 and threads % per_row == 0 and rows_per_step % 8 == 0:
        _async_rows(em, arr, origin, per_row, steps, rows_per_step, dst, cols)
        return
    for step in range(steps):
        chunk_id = b.add(em.tid, I32(step * threads))
        guard = b.icmp_unsigned("<", chunk_id, I32(total)) if total % threads else None
        ctx = b.if_then(guard) if guard is not None else _nullcontext()
        with ctx:
            row = b.lshr(chunk_id, I32(log2(per_row)))
            chunk = b.and_(chunk_id, I32(per_row - 1))
            target = b.add(dst, _swizzled(b, cols * 2, row, chunk))
            grow = b.add(origin[0], b.zext(row, I64))
            gcol = b.add(origin[1], b.shl(b.zext(chunk, I64), I64(3)))
            if async_copy:
                _async_chunk(em, arr, grow, gcol, target)
            else:
                _masked_chunk(em, arr, grow, gcol, target)


def _async_rows(em, arr, origin, per_row: int, steps: int, rows_per_step: int, dst, cols: int) -> None:
    """The copy where every step moves the same chunk of rows ``rows_per_step`` further on (a
    multiple of 8, so the swizzle is the same): each step's addresses are the first step's plus
    constants, chained, rather than values of their own that LLVM would keep live in a loop."""
    b = em.b
    row = b.lshr(em.tid, I32(log2(per_row)))
    chunk = b.and_(em.tid, I32(per_row - 1))
    target = b.add(dst, _swizzled(b, cols * 2, row, chunk))
    grow = b.add(origin[0], b.zext(row, I64))
    gcol = b.add(origin[1], b.shl(b.zext(chunk, I64), I64(3)))
    left = b.sub(arr.shape[1], gcol)
    count = b.select(b.icmp_signed("<", left, I64(8)), left, I64(8))
    col_bytes = b.select(b.icmp_unsigned("<", gcol, arr.shape[1]), b.trunc(b.shl(count, I64(1)), I32), I32(0))
    offset = b.add(b.mul(grow, arr.strides[0]), gcol)
    step_offset = b.mul(I64(rows_per_step), arr.strides[0])
    fn = declare(em.module, "llvm.nvvm.cp.async.cg.shared.global.16.s", VOID, [SHARED_PTR, GLOBAL_PTR, I32])
    for step in range(steps):
        if step:
            grow = b.add(grow, I64(rows_per_step))
            offset = b.add(offset, step_offset)
            target = b.add(target, I32(rows_per_step * cols * 2))
        inside = b.icmp_unsigned("<", grow, arr.shape[0])
        src = b.gep(arr.data, [b.select(inside, offset, I64(0))], source_etype=I16)
        b.call(fn, [em.smem_ptr(target), src, b.select(inside, col_bytes, I32(0))])


def _async_chunk(em, arr, grow, gcol, target) -> None:
    b = em.b
    inside = b.and_(b.icmp_unsigned("<", grow, arr.shape[0]), b.icmp_unsigned("<", gcol, arr.shape[1]))
    left = b.sub(arr.shape[1], gcol)
    count = b.select(b.icmp_signed("<", left, I64(8)), left, I64(8))
    nbytes = b.select(inside, b.trunc(b.shl(count, I64(1)), I32), I32(0))
    offset = b.select(inside, b.add(b.mul(grow, arr.strides[0]), gcol), I64(0))
    src = b.gep(arr.data, [offset], source_etype=I16)
    fn = declare(em.module, "llvm.nvvm.cp.async.cg.shared.global.16.s", VOID, [SHARED_PTR, GLOBAL_PTR, I32])
    b.call(fn, [em.smem_ptr(target), src, nbytes])


def _masked_chunk(em, arr, grow, gcol, target) -> None:
    b = em.b
    v = lir.Constant(lir.VectorType(I16, 8), lir.Undefined)
    for i in range(8):
        col = b.add(gcol, I64(i))
        ok = b.and_(b.icmp_unsigned("<", grow, arr.shape[0]), b.icmp_unsigned("<", col, arr.shape[1]))
        offset = b.add(b.mul(grow, arr.strides[0]), b.mul(col, arr.strides[1]))
        value = predicated_load(em, b.gep(arr.data, [offset], source_etype=I16), ok, arr.elem)
        bits = to_memory(b, b.select(ok, value, value.type(0.0)), arr.elem)
        v = b.insert_element(v, bits if bits.type == I16 else b.bitcast(bits, I16), I32(i))
    b.store(v, em.smem_ptr(target), align=16)


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
