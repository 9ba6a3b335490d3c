"""Stage 4: planned tile IR -> LLVM IR (text), with llvmlite's IR builder.

One block of ``plan.threads`` threads runs the body for one tile. Scalars
are ordinary registers, the same in every thread; a tile is a list of
registers per thread, in the layout the plan gave its node. Parameters
follow kernel ABI v1 (a ``tile.Out`` is passed like a tensor), then the
trailing tile schedule. The body runs in a loop over the block's tiles:
linear tile ids from its linear block id in steps of the grid's block count
(one tile per block unless the launch is persistent), each decoded into the
outputs' tile ids, in row order or in bands of rows (schedule.py; mma
kernels take bands of 8 by default, for L2 reuse). Every order is a
bijection, so each tile is still computed by exactly one block.

Shared memory is one dynamically sized ``extern .shared`` array: the
software pipelines' stage buffers first, then the resident mma operands,
then the scratch area that layout conversions, cross-warp reductions and
staged mma operands reuse in turn. Its size is the specialization's
``shared_bytes``. A plan with a Hopper K loop (sm_90a) puts its ring of
stages and their mbarriers first instead, and its entry takes the operands'
tensor maps after the tile schedule (``hopper``).
"""

from __future__ import annotations

import functools
import math
from contextlib import contextmanager
from dataclasses import dataclass

import llvmlite.ir as lir

from buildtile.backends.common.entry import ArrayArg, FunctionBody, by_value_tensor_maps, kernel_entry, open_body
from buildtile.backends.common.llvm import (
    I1,
    I8,
    I32,
    I64,
    SHARED_PTR,
    asm,
    barrier,
    compare,
    const_of,
    convert,
    declare,
    floor_div,
    floor_mod,
    intrinsic,
    is_half,
    libdevice,
    new_module,
    reg_type,
    round_half,
    sreg,
    type_suffix,
)
from buildtile.backends.tile import exchange, gather, ir, memory, mma, outputs, philox, schedule, scatter, types
from buildtile.backends.tile.exchange import TileVal
from buildtile.backends.tile.hopper import pipeline as hopper_pipeline
from buildtile.backends.tile.hopper import tensor_maps as hopper_maps
from buildtile.backends.tile.hopper import wgmma
from buildtile.backends.tile.layout import Layout
from buildtile.backends.tile.mma_operands import OPERAND_ALIGN
from buildtile.backends.tile.plan import Plan
from buildtile.backends.tile.types import BOOL, F32, Scalar, TileT, Weak, value_type
from buildtile.interop.abi import TILE_SCHEDULE

SMEM = "__buildtile_tile_smem"

#: math functions LLVM has an intrinsic for; the others call libdevice (``__nv_<name>f``)
_LLVM_MATH = {"sqrt": "llvm.sqrt", "abs": "llvm.fabs", "floor": "llvm.floor", "ceil": "llvm.ceil",
              "maximum": "llvm.maxnum", "minimum": "llvm.minnum"}


@dataclass
class _TileLoop:
    head: lir.Block        # where the next tile id is tested
    linear: lir.Value      # the current linear tile id (a phi at the head)
    stride: lir.Value      # the grid's block count
    total: lir.Value       # the tiles of the grid output


@dataclass
class LoweredKernel:
    llvm_ir: str
    shared_bytes: int
    threads: int


def lower_to_llvm(kernel: ir.KernelIR, params: list[dict], plan: Plan, symbol: str) -> LoweredKernel:
    """LLVM IR of one specialization, named ``symbol``; ``params`` are its manifest parameter records."""
    return _Emitter(kernel, params, plan, symbol).run()


class _Emitter:
    def __init__(self, kernel: ir.KernelIR, params: list[dict], plan: Plan, symbol: str) -> None:
        self.kernel = kernel
        self.params = params
        self.plan = plan
        self.symbol = symbol
        self.module = new_module(symbol)
        self.arrays: dict[str, ArrayArg] = {}
        self.scalars: dict[str, lir.Value] = {}
        self.slots: dict[str, object] = {}          # local -> alloca (scalar) or list of allocas (tile)
        self.overrides: dict[str, lir.Value] = {}   # loop variables evaluated ahead of their iteration
        self.smem_operands: dict[str, mma.SmemTile] = {}
        # operands in shared memory are aligned to a multiple of their rows (see mma_operands)
        self.resident_base = _align(plan.pipeline_bytes, OPERAND_ALIGN)
        self.scratch_base = _align(self.resident_base + plan.resident_bytes, OPERAND_ALIGN)
        self.scratch_bytes = 0
        self._thread_parts: dict = {}
        self.helpers: dict = {}                    # cold device functions, by what they do
        self._tile_ids: dict[tuple[str, int], lir.Value] = {}
        self.tensor_maps: dict[str, lir.Value] = {}   # Hopper: array parameter -> its tensor map's address
        self.ring: hopper_pipeline.Ring | None = None

    # ------------------------------------------------------------ structure
    def run(self) -> LoweredKernel:
        hopper = self.plan.hopper
        maps = hopper_maps.map_params(hopper) if hopper is not None else []
        entry = kernel_entry(self.module, self.symbol, self.params, trailing=[TILE_SCHEDULE, *maps],
                             reqntid=(self.plan.threads, 1, 1), min_blocks=self.plan.min_blocks)
        self._enter(entry)
        self.scalars, self.arrays = entry.scalars, entry.arrays
        self.tensor_maps = {op.load.param: entry.trailing[q.name] for op, q in zip(hopper.operands, maps)} \
            if hopper is not None else {}
        self.smem_global = lir.GlobalVariable(self.module, lir.ArrayType(I8, 0), SMEM, addrspace=3)
        self.smem_global.align = 16
        self._enter_function_entry()
        if hopper is not None:
            self.ring = hopper_pipeline.init_ring(self, hopper)
        loop = self._enter_tiles(entry.trailing[TILE_SCHEDULE.name])
        self.stmts(self.kernel.body)
        self._next_tile(loop)
        if not self.b.block.is_terminated:
            self.b.ret_void()
        shared = self.scratch_base + self.scratch_bytes if self.scratch_bytes else \
            (self.resident_base + self.plan.resident_bytes if self.plan.resident else self.plan.pipeline_bytes)
        text = str(self.module)
        if maps:
            text = by_value_tensor_maps(text, self.symbol, maps)
        return LoweredKernel(text, shared, self.plan.threads)

    def _enter(self, body: FunctionBody) -> None:
        self.fn, self.alloca_builder, self.b = body.fn, body.alloca_builder, body.builder

    def _enter_function_entry(self) -> None:
        """Values every function computes once in its entry block: the thread index, shared memory."""
        b = self.alloca_builder
        self.smem = b.inttoptr(b.ptrtoint(self.smem_global, I64), SHARED_PTR, name="smem")
        self.tid = sreg(b, "tid.x")
        self._thread_parts = {}

    @contextmanager
    def device_function(self, name: str, arg_types: list[lir.Type]):
        """Emit into a separate, never-inlined device function (yields its arguments).

        For cold paths inside hot loops: LLVM hoists a path's loop-invariant values out of the
        loop even when the path never runs, and every hoisted value holds a register there.
        """
        fn = lir.Function(self.module, lir.FunctionType(lir.VoidType(), arg_types), f"{self.symbol}.{name}")
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        saved = (self.fn, self.b, self.alloca_builder, self.smem, self.tid, self._thread_parts)
        self._enter(open_body(fn))
        self._enter_function_entry()
        try:
            yield fn
            self.b.ret_void()
        finally:
            self.fn, self.b, self.alloca_builder, self.smem, self.tid, self._thread_parts = saved

    # ------------------------------------------------------------ services for the other lowering modules
    def smem_ptr(self, offset: lir.Value) -> lir.Value:
        """A shared-memory pointer ``offset`` (i32) bytes into the kernel's shared memory."""
        return self.b.gep(self.smem, [offset], source_etype=I8)

    def scratch(self, nbytes: int) -> int:
        """The byte offset of a scratch area of ``nbytes``, valid until the next request."""
        self.scratch_bytes = max(self.scratch_bytes, _align(nbytes, 16))
        return self.scratch_base

    def thread_part(self, layout: Layout, axis: int) -> lir.Value:
        """The coordinate bits along ``axis`` that come from the thread index (i32), built once."""
        key = (layout.thread, axis)
        value = self._thread_parts.get(key)
        if value is None:
            b = self.alloca_builder
            value = I32(0)
            for bit, length, coord_bit in layout.thread_runs(axis):
                part = b.and_(b.lshr(self.tid, I32(bit)), I32((1 << length) - 1))
                value = b.or_(value, b.shl(part, I32(coord_bit)))
            self._thread_parts[key] = value
        return value

    def owner(self, layout: Layout) -> lir.Value | None:
        """For a layout with copies: true in the one thread of each group of copies that writes."""
        mask = layout.replicated_mask
        if not mask:
            return None
        return self.b.icmp_unsigned("==", self.b.and_(self.tid, I32(mask)), I32(0))

    def mark_invariant(self, load: lir.Instruction) -> None:
        # inputs are never written during a launch (BT0594) nor alias an output (the host checks):
        # lets LLVM use the non-coherent path, ld.global.nc
        load.set_metadata("invariant.load", self.module.add_metadata([]))

    def scalar_slot(self, name: str) -> lir.Value:
        slot = self.slots.get(name)
        if slot is None:
            slot = self.slots[name] = self.alloca_builder.alloca(reg_type(value_type(self.kernel.locals[name])), name=name)
        return slot

    def tile_slots(self, name: str) -> list[lir.Value]:
        slots = self.slots.get(name)
        if slots is None:
            ty = self.kernel.locals[name]
            layout = self.plan.var_layouts[name]
            slots = self.slots[name] = [self.alloca_builder.alloca(reg_type(ty.dtype), name=f"{name}.{r}")
                                        for r in range(layout.nregs)]
        return slots

    # ------------------------------------------------------------ statements
    def stmts(self, stmts: list[ir.Stmt]) -> None:
        for s in stmts:
            getattr(self, "stmt_" + type(s).__name__)(s)

    def stmt_Assign(self, s: ir.Assign) -> None:
        if s.name in self.plan.resident:
            mma.stage_resident(self, self.plan.resident[s.name])
            return
        if s.name in self.plan.smem_operands:
            return     # issued ahead by its loop's pipeline
        if isinstance(s.value.ty, TileT):
            val = self.tile_in(s.value, self.plan.var_layouts[s.name])
            for slot, reg in zip(self.tile_slots(s.name), val.regs):
                self.b.store(reg, slot)
        else:
            self.b.store(self.scalar(s.value), self.scalar_slot(s.name))

    def stmt_Store(self, s: ir.Store) -> None:
        arr = self.arrays[s.param]
        val = self.tile(s.value)
        if s.index is None:
            index = [self.tile_id(s.param, a) for a in range(len(arr.shape))]
        else:
            index = [self.scalar(i) for i in s.index]
        origin = [self.b.mul(i, I64(t)) for i, t in zip(index, s.value.ty.shape)]
        primary = outputs.followers(self.kernel.tile_shapes).get(s.param)
        if primary is None:
            memory.store_tile(self, arr, origin, val.layout, val.regs)
            return
        # a lower-rank output's tile is written by one block: the one at tile 0 along the primary's other axes
        rank = len(self.kernel.tile_shapes[primary])
        first = [self.b.icmp_signed("==", self.tile_id(primary, a), I64(0)) for a in range(len(index), rank)]
        with self.b.if_then(functools.reduce(self.b.and_, first)):
            memory.store_tile(self, arr, origin, val.layout, val.regs)

    def stmt_AtomicAdd(self, s: scatter.AtomicAdd) -> None:
        e = s.value
        values = self.tile_in(e.values, e.layout).regs
        indices = self.operands(e, *e.indices)
        mask = self.operands(e, e.mask)[0] if e.mask is not None else None
        scatter.lower_atomic_add(self, self.arrays[s.param], values, indices, mask, self.owner(e.layout))

    def stmt_If(self, s: ir.If) -> None:
        cond = self.scalar(s.cond)
        if s.orelse:
            with self.b.if_else(cond) as (then, otherwise):
                with then:
                    self.stmts(s.then)
                with otherwise:
                    self.stmts(s.orelse)
        else:
            with self.b.if_then(cond):
                self.stmts(s.then)

    def stmt_ForRange(self, s: ir.ForRange) -> None:
        if self.plan.hopper is not None and self.plan.hopper.loop is s:
            hopper_pipeline.emit_loop(self, self.plan.hopper)
            return
        pipe = self.plan.pipelines.get(id(s))
        if pipe is not None:
            mma.emit_pipelined_loop(self, pipe)
            return
        b = self.b
        slot = self.scalar_slot(s.var)
        stop = self.scalar(s.stop)
        step = I64(s.step) if isinstance(s.step, int) else self.scalar(s.step)
        b.store(self.scalar(s.start), slot)
        head, body, done = (self.fn.append_basic_block(f"for.{n}") for n in ("cond", "body", "end"))
        b.branch(head)
        b.position_at_end(head)
        i = b.load(slot)
        if isinstance(s.step, int):
            go_on = b.icmp_signed("<" if s.step > 0 else ">", i, stop)
        else:   # as Python's range: up while below stop, down while above; a zero step runs nothing
            up = b.and_(b.icmp_signed(">", step, I64(0)), b.icmp_signed("<", i, stop))
            down = b.and_(b.icmp_signed("<", step, I64(0)), b.icmp_signed(">", i, stop))
            go_on = b.or_(up, down)
        b.cbranch(go_on, body, done)
        b.position_at_end(body)
        self.stmts(s.body)
        b.store(b.add(b.load(slot), step), slot)
        b.branch(head)
        b.position_at_end(done)

    # ------------------------------------------------------------ scalars
    def scalar(self, e: ir.Expr) -> lir.Value:
        return getattr(self, "scalar_" + type(e).__name__)(e)

    def scalar_Const(self, e: ir.Const) -> lir.Value:
        ty = e.ty.default if isinstance(e.ty, Weak) else e.ty
        return const_of(ty, e.value)

    def scalar_Var(self, e: ir.Var) -> lir.Value:
        if e.name in self.overrides:
            return self.overrides[e.name]
        return self.b.load(self.scalar_slot(e.name))

    def scalar_ScalarParam(self, e: ir.ScalarParam) -> lir.Value:
        return self.scalars[e.name]

    def scalar_Shape(self, e: ir.Shape) -> lir.Value:
        return self.arrays[e.param].shape[e.axis]

    def scalar_TileId(self, e: ir.TileId) -> lir.Value:
        return self.tile_id(e.param, e.axis)

    def scalar_NumTiles(self, e: ir.NumTiles) -> lir.Value:
        t = self.kernel.tile_shapes[e.param][e.axis]
        extent = self.arrays[e.param].shape[e.axis]
        return self.b.sdiv(self.b.add(extent, I64(t - 1)), I64(t))

    def scalar_BinOp(self, e: ir.BinOp) -> lir.Value:
        return self.binop(e.op, value_type(e.ty), self.scalar(e.lhs), self.scalar(e.rhs))

    def scalar_Compare(self, e: ir.Compare) -> lir.Value:
        return compare(self.b, e.op, value_type(e.lhs.ty), self.scalar(e.lhs), self.scalar(e.rhs))

    def scalar_UnaryOp(self, e: ir.UnaryOp) -> lir.Value:
        return self.unary(e.op, value_type(e.ty), self.scalar(e.operand))

    def scalar_BoolOp(self, e: ir.BoolOp) -> lir.Value:
        values = [self.scalar(v) for v in e.values]
        out = values[0]
        for v in values[1:]:
            out = self.b.and_(out, v) if e.op == "and" else self.b.or_(out, v)
        return out

    def scalar_Select(self, e: ir.Select) -> lir.Value:
        return self.b.select(self.scalar(e.cond), self.scalar(e.then), self.scalar(e.orelse))

    def scalar_Cast(self, e: ir.Cast) -> lir.Value:
        return convert(self.b, self.scalar(e.value), value_type(e.value.ty), e.ty)

    def scalar_Random(self, e: philox.Random) -> lir.Value:
        return philox.sample(self.b, self.module, e.kind, self.scalar(e.seed), self.scalar(e.offset))

    def scalar_Math(self, e: ir.Math) -> lir.Value:
        return self.math(e.name, value_type(e.ty), [self.scalar(a) for a in e.args])

    # ------------------------------------------------------------ grid
    def _enter_tiles(self, schedule_word: lir.Value) -> _TileLoop | None:
        """Open the loop over this block's tiles (schedule.py): linear tile ids from the linear
        block id in steps of the grid's block count, each decoded into this block's tile ids."""
        grid_param = next(iter(self.kernel.tile_shapes), None)
        if grid_param is None:
            return None
        b = self.b
        counts = schedule.tile_counts(b, self.arrays[grid_param].shape, self.kernel.tile_shapes[grid_param])
        default = schedule.GROUP_ROWS if self.plan.grouped_grid and len(counts) == 2 else 1
        start, stride = schedule.linear_block_id(b), schedule.block_count(b)
        total = schedule.tile_total(b, counts)
        pre = b.block
        head, body, done = (self.fn.append_basic_block(f"tiles.{n}") for n in ("head", "body", "done"))
        b.branch(head)
        b.position_at_end(head)
        linear = b.phi(I64, name="tile")
        linear.add_incoming(start, pre)
        b.cbranch(b.icmp_unsigned("<", linear, total), body, done)
        b.position_at_end(done)
        b.ret_void()
        b.position_at_end(body)
        # an opaque copy of the shared-memory base for each tile: addresses built from it are not
        # loop invariants of the loop over tiles, which LLVM would hoist and keep live through it
        self.smem = b.inttoptr(asm(b, I64, "mov.b64 $0, $1;", "=l,l", [b.ptrtoint(self.smem, I64)], side_effect=True),
                               SHARED_PTR)
        group = schedule.emit_group(b, schedule_word, default) if len(counts) == 2 else None
        narrow = math.prod(self.kernel.tile_shapes[grid_param]) >= schedule.NARROW_DECODE_ELEMENTS
        ids = schedule.emit_tile_of_block(b, linear, counts, group, narrow=narrow)
        for param, shape in self.kernel.tile_shapes.items():   # a lower-rank output follows the leading axes
            for axis, value in enumerate(ids[:len(shape)]):
                self._tile_ids[(param, axis)] = value
        return _TileLoop(head, linear, stride, total)

    def _next_tile(self, loop: _TileLoop | None) -> None:
        """Close the loop: on to the block's next tile, after a barrier, so that its shared memory
        is not rewritten while a thread still reads this tile's (a block with one tile skips it)."""
        if loop is None or self.b.block.is_terminated:
            return
        b = self.b
        after = b.add(loop.linear, loop.stride)
        again, done = (self.fn.append_basic_block(f"tiles.{n}") for n in ("next", "last"))
        b.cbranch(b.icmp_unsigned("<", after, loop.total), again, done)
        b.position_at_end(done)
        b.ret_void()
        b.position_at_end(again)
        barrier(b)
        loop.linear.add_incoming(after, b.block)
        b.branch(loop.head)

    def tile_id(self, param: str, axis: int) -> lir.Value:
        """This block's tile index along ``axis`` of ``param``'s partition, in the current tile."""
        return self._tile_ids[(param, axis)]

    def tile_in(self, e: ir.Expr, layout: Layout) -> TileVal:
        return exchange.convert(self, self.tile(e), layout)

    def tile(self, e: ir.Expr) -> TileVal:
        val = getattr(self, "tile_" + type(e).__name__)(e)
        assert val.layout == e.layout, (type(e).__name__, val.layout, e.layout)
        return val

    def tile_Var(self, e: ir.Var) -> TileVal:
        regs = [self.b.load(slot) for slot in self.tile_slots(e.name)]
        return TileVal(self.plan.var_layouts[e.name], regs, e.ty.dtype)

    def tile_Load(self, e: ir.Load) -> TileVal:
        index = [self.scalar(i) for i in e.index]
        origin = [self.b.mul(i, I64(t)) for i, t in zip(index, e.ty.shape)]
        regs = memory.load_tile(self, self.arrays[e.param], origin, e.layout, e.padding)
        return TileVal(e.layout, regs, e.ty.dtype)

    def tile_Full(self, e: ir.Full) -> TileVal:
        return TileVal(e.layout, [const_of(e.ty.dtype, e.value)] * e.layout.nregs, e.ty.dtype)

    def tile_Splat(self, e: ir.Splat) -> TileVal:
        return TileVal(e.layout, [self.scalar(e.value)] * e.layout.nregs, e.ty.dtype)

    def tile_Arange(self, e: ir.Arange) -> TileVal:
        b = self.b
        base = self.thread_part(e.layout, 0)
        regs = [convert(b, b.add(base, I32(e.layout.reg_coords(r)[0])), types.I32, e.ty.dtype)
                for r in range(e.layout.nregs)]
        return TileVal(e.layout, regs, e.ty.dtype)

    def tile_Broadcast(self, e: ir.Broadcast) -> TileVal:
        return exchange.broadcast(self, self.tile(e.value), e.layout)

    def tile_ExpandDims(self, e: ir.ExpandDims) -> TileVal:
        val = self.tile(e.value)
        return TileVal(val.layout.expand(e.axis), val.regs, val.dtype)

    def tile_Reshape(self, e: ir.Reshape) -> TileVal:
        val = self.tile(e.value)
        return TileVal(val.layout.reshape(e.ty.shape), val.regs, val.dtype)

    def tile_Permute(self, e: ir.Permute) -> TileVal:
        val = self.tile(e.value)
        return TileVal(val.layout.permute(e.perm), val.regs, val.dtype)

    def tile_Reduce(self, e: ir.Reduce) -> TileVal:
        return exchange.reduce(self, self.tile(e.value), e.axis, e.op)

    def tile_Mma(self, e: ir.Mma) -> TileVal:
        if self.plan.hopper is not None and self.plan.hopper.mma is e:
            return wgmma.emit_mma(self, e)
        return mma.emit_mma(self, e)

    def operands(self, e: ir.Expr, *children: ir.Expr) -> list[list[lir.Value]]:
        return [self.tile_in(c, e.layout).regs for c in children]

    def tile_BinOp(self, e: ir.BinOp) -> TileVal:
        lhs, rhs = self.operands(e, e.lhs, e.rhs)
        dtype = e.ty.dtype
        return TileVal(e.layout, [self.binop(e.op, dtype, x, y) for x, y in zip(lhs, rhs)], dtype)

    def tile_Compare(self, e: ir.Compare) -> TileVal:
        lhs, rhs = self.operands(e, e.lhs, e.rhs)
        dtype = e.lhs.ty.dtype
        return TileVal(e.layout, [compare(self.b, e.op, dtype, x, y) for x, y in zip(lhs, rhs)], BOOL)

    def tile_UnaryOp(self, e: ir.UnaryOp) -> TileVal:
        (regs,) = self.operands(e, e.operand)
        return TileVal(e.layout, [self.unary(e.op, e.ty.dtype, x) for x in regs], e.ty.dtype)

    def tile_Cast(self, e: ir.Cast) -> TileVal:
        (regs,) = self.operands(e, e.value)
        src = e.value.ty.dtype
        if e.ty.dtype == types.BF16 and src != types.BF16 and len(regs) % 2 == 0:
            wide = [convert(self.b, x, src, types.F32) for x in regs]
            return TileVal(e.layout, memory.round_bf16(self.b, wide), e.ty.dtype)
        return TileVal(e.layout, [convert(self.b, x, src, e.ty.dtype) for x in regs], e.ty.dtype)

    def tile_Math(self, e: ir.Math) -> TileVal:
        args = self.operands(e, *e.args)
        return TileVal(e.layout, [self.math(e.name, e.ty.dtype, list(xs)) for xs in zip(*args)], e.ty.dtype)

    def tile_Gather(self, e: gather.Gather) -> TileVal:
        indices = self.operands(e, *e.indices)
        mask = self.operands(e, e.mask)[0] if e.mask is not None else None
        return TileVal(e.layout, gather.lower_gather(self, self.arrays[e.param], e, indices, mask), e.ty.dtype)

    def tile_Random(self, e: philox.Random) -> TileVal:
        seeds, offsets = self.operands(e, e.seed, e.offset)
        return TileVal(e.layout, [philox.sample(self.b, self.module, e.kind, s, o) for s, o in zip(seeds, offsets)],
                       e.ty.dtype)

    def tile_Where(self, e: ir.Where) -> TileVal:
        cond, then, orelse = self.operands(e, e.cond, e.then, e.orelse)
        return TileVal(e.layout, [self.b.select(c, x, y) for c, x, y in zip(cond, then, orelse)], e.ty.dtype)

    # ------------------------------------------------------------ one element (scalars and tile registers)
    def binop(self, op: str, ty: Scalar, lhs: lir.Value, rhs: lir.Value) -> lir.Value:
        b = self.b
        if op == "**":
            return self.power(ty, lhs, rhs)
        if op in ("<<", ">>"):
            return self.shift(op, ty, lhs, rhs)
        if ty.is_float:
            if op in ("//", "%"):
                q = b.call(intrinsic(self.module, "llvm.floor", lhs.type, 1), [b.fdiv(lhs, rhs)])
                out = q if op == "//" else b.fsub(lhs, b.fmul(rhs, q))
            else:
                out = {"+": b.fadd, "-": b.fsub, "*": b.fmul, "/": b.fdiv}[op](lhs, rhs)
                out.flags.append("contract")   # allow fused multiply-add, as nvcc does by default
            return round_half(b, out, ty)
        signed = ty.kind == "int"
        if op == "cdiv":
            return b.neg(floor_div(b, b.neg(lhs), rhs)) if signed else b.udiv(b.add(lhs, b.sub(rhs, rhs.type(1))), rhs)
        if op == "//":
            return floor_div(b, lhs, rhs) if signed else b.udiv(lhs, rhs)
        if op == "%":
            return floor_mod(b, lhs, rhs) if signed else b.urem(lhs, rhs)
        return {"+": b.add, "-": b.sub, "*": b.mul, "&": b.and_, "|": b.or_, "^": b.xor}[op](lhs, rhs)

    def power(self, ty: Scalar, base: lir.Value, exponent: lir.Constant) -> lir.Value:
        """``base ** k`` for the typer's small constant ``k``: multiplications by squaring, each one
        rounded as ``x * x`` is (so f16 and bf16 powers match the products written out)."""
        k = int(exponent.constant)
        if k == 0:
            return const_of(ty, 1)
        result, square = None, base
        while k:
            if k & 1:
                result = square if result is None else self.binop("*", ty, result, square)
            k >>= 1
            if k:
                square = self.binop("*", ty, square, square)
        return result

    def shift(self, op: str, ty: Scalar, lhs: lir.Value, rhs: lir.Value) -> lir.Value:
        """``<<`` and ``>>`` (arithmetic for signed types, logical for unsigned). A constant amount is in
        range (the typer checks); a run-time amount of ``bits`` or more -- a negative one too, read
        as unsigned -- shifts every bit out: 0, or the sign for ``>>`` of a signed value."""
        b = self.b
        signed = ty.kind == "int"
        if isinstance(rhs, lir.Constant):
            return b.shl(lhs, rhs) if op == "<<" else b.ashr(lhs, rhs) if signed else b.lshr(lhs, rhs)
        bits = rhs.type(ty.bits)
        out_of_range = b.icmp_unsigned(">=", rhs, bits)
        if op == ">>" and signed:
            return b.ashr(lhs, b.select(out_of_range, rhs.type(ty.bits - 1), rhs))
        shifted = b.shl(lhs, rhs) if op == "<<" else b.lshr(lhs, rhs)
        return b.select(out_of_range, lhs.type(0), shifted)

    def unary(self, op: str, ty: Scalar, v: lir.Value) -> lir.Value:
        b = self.b
        if op in ("not", "~"):
            return b.not_(v)
        return b.fneg(v) if ty.is_float else b.neg(v)

    def math(self, name: str, ty: Scalar, args: list[lir.Value]) -> lir.Value:
        b = self.b
        t = reg_type(ty)
        if not ty.is_float:
            if name == "abs":
                return b.call(declare(self.module, f"llvm.abs.{type_suffix(t)}", t, [t, I1]), [args[0], I1(0)])
            signed = ty.kind == "int"
            op = {"maximum": "llvm.smax" if signed else "llvm.umax", "minimum": "llvm.smin" if signed else "llvm.umin"}[name]
            return b.call(intrinsic(self.module, op, t, 2), args)
        if name == "sigmoid":
            e = self.math("exp", ty, [b.fneg(args[0])])
            return round_half(b, b.fdiv(t(1.0), b.fadd(t(1.0), e)), ty)
        if name in ("gelu", "gelu_tanh"):
            return round_half(b, self.gelu(name == "gelu_tanh", F32 if is_half(ty) else ty, args[0]), ty)
        if name in _LLVM_MATH:
            out = b.call(intrinsic(self.module, _LLVM_MATH[name], t, len(args)), args)
        else:
            out = b.call(libdevice(self.module, name, t, len(args)), args)
        return round_half(b, out, ty)

    def gelu(self, tanh_form: bool, ty: Scalar, x: lir.Value) -> lir.Value:
        """torch's gelu in ``ty`` (f16/bf16 are computed in f32 and rounded once, by the caller):
        ``x/2 * (1 + erf(x/sqrt(2)))``, or ``x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))``."""
        b = self.b
        t = reg_type(ty)
        if tanh_form:
            cube = b.fmul(b.fmul(x, x), x)
            inner = b.fmul(t(math.sqrt(2.0 / math.pi)), b.fadd(x, b.fmul(t(0.044715), cube)))
            curve = self.math("tanh", ty, [inner])
        else:
            curve = self.math("erf", ty, [b.fmul(x, t(math.sqrt(0.5)))])
        return b.fmul(b.fmul(x, t(0.5)), b.fadd(t(1.0), curve))


def _align(n: int, to: int) -> int:
    return (n + to - 1) // to * to


__all__ = ["LoweredKernel", "lower_to_llvm"]
