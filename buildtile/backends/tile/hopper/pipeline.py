"""The K loop on Hopper: a ring of ``stages`` shared-memory stages, each guarded by an mbarrier.

Thread 0 produces: for K step ``j`` it arms the barrier of stage
``g % stages`` (``g``: the step's number counted over every tile the block has
computed) with the bytes both operand tiles take (``mbarrier.arrive.expect_tx``)
and starts their copies (tensor_maps.copy_tile). Every thread consumes: step
``g`` waits until its barrier completes phase ``(g / stages) % 2``
(``mbarrier.try_wait.parity``), then the warpgroups issue their wgmmas and
wait for the previous step's (``wait_group 1``). A barrier of the whole block
then proves every warpgroup is done reading that previous step's stage, and
thread 0 refills it with step ``j - 1 + stages``. So ``stages - 1`` copies are
in flight while one step computes.

The barriers are set up once per block, before its first tile; the step
count ``g`` carries over from tile to tile (a persistent block), so each
barrier's phases keep alternating.
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as lir

from buildtile.backends.common.llvm import I32, I64, VOID, asm, barrier
from buildtile.backends.tile import ir
from buildtile.backends.tile.hopper import tensor_maps, wgmma
from buildtile.backends.tile.hopper.descriptors import ELEM_BYTES, PANEL_ALIGN
from buildtile.backends.tile.hopper.select import BARRIER_BYTES, HopperPlan
from buildtile.backends.tile.loops import counted, trip_count


@dataclass
class Ring:
    """Where the ring lives in this block, computed once per kernel."""

    base: lir.Value          # shared address (i32) of stage 0, aligned to PANEL_ALIGN
    barriers: lir.Value      # shared address of stage 0's mbarrier (the others follow, 8 bytes apart)
    steps: lir.Value         # alloca (i32): K steps this block has consumed over its tiles so far


def init_ring(em, plan: HopperPlan) -> Ring:
    """Align the ring, initialise the stages' barriers (one arrival each: thread 0's) and make them
    visible to the copy engine, before the block's first tile."""
    entry = em.alloca_builder
    address = entry.ptrtoint(em.smem_global, I32)
    base = entry.and_(entry.add(address, I32(PANEL_ALIGN - 1)), I32(-PANEL_ALIGN))
    ring = Ring(base, entry.add(base, I32(plan.ring_bytes)), entry.alloca(I32, name="ring.steps"))
    entry.store(I32(0), ring.steps)
    b = em.b
    with b.if_then(b.icmp_unsigned("==", em.tid, I32(0))):
        for s in range(plan.stages):
            asm(b, VOID, "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}",
                [_barrier(b, ring, I32(s)), I32(1)], side_effect=True)
        asm(b, VOID, "fence.mbarrier_init.release.cluster;", "~{memory}", [], side_effect=True)
    barrier(b)
    return ring


def _barrier(b: lir.IRBuilder, ring: Ring, stage: lir.Value) -> lir.Value:
    return b.add(ring.barriers, b.mul(stage, I32(BARRIER_BYTES)))


def _expect(b: lir.IRBuilder, bar: lir.Value, nbytes: int) -> None:
    asm(b, VOID, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}", [bar, I32(nbytes)],
        side_effect=True)


def _wait(em, bar: lir.Value, parity: lir.Value) -> None:
    """Spin until the mbarrier at ``bar`` has completed the phase of ``parity``."""
    b = em.b
    head, done = em.fn.append_basic_block("ring.wait"), em.fn.append_basic_block("ring.ready")
    b.branch(head)
    b.position_at_end(head)
    ready = asm(b, I32, "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; selp.u32 $0, 1, 0, p; }",
                "=r,r,r,~{memory}", [bar, parity], side_effect=True)
    b.cbranch(b.icmp_unsigned("!=", ready, I32(0)), done, head)
    b.position_at_end(done)


def emit_loop(em, plan: HopperPlan) -> None:
    """The K loop ``plan.loop`` with its operands through the ring and its mma as wgmmas."""
    b = em.b
    ring: Ring = em.ring
    loop = plan.loop
    start, trips = trip_count(em, loop)
    trips = b.trunc(trips, I32)
    first = b.load(ring.steps)
    producer = b.icmp_unsigned("==", em.tid, I32(0))
    tx_bytes = sum(op.panels.rows * op.panels.cols * ELEM_BYTES for op in plan.operands)

    def stage_of(step: lir.Value) -> lir.Value:
        return b.urem(b.add(first, step), I32(plan.stages))

    def issue(step: lir.Value) -> None:
        stage = stage_of(step)
        bar = _barrier(b, ring, stage)
        _expect(b, bar, tx_bytes)
        em.overrides[loop.var] = b.add(start, b.mul(b.zext(step, I64), I64(loop.step)))
        try:
            for op in plan.operands:
                origin = [b.mul(em.scalar(i), I64(t)) for i, t in zip(op.load.index, op.load.ty.shape)]
                dst = b.add(ring.base, b.add(b.mul(stage, I32(plan.stage_bytes)), I32(op.offset)))
                tensor_maps.copy_tile(b, op, em.tensor_maps[op.load.param], dst, origin, bar)
        finally:
            del em.overrides[loop.var]

    with b.if_then(producer):
        for s in range(plan.stages):
            with b.if_then(b.icmp_signed("<", I32(s), trips)):
                issue(I32(s))

    with counted(em, trips, "ring") as it:
        step = b.add(first, it)
        stage = b.urem(step, I32(plan.stages))
        _wait(em, _barrier(b, ring, stage), b.and_(b.udiv(step, I32(plan.stages)), I32(1)))
        stage_base = b.add(ring.base, b.mul(stage, I32(plan.stage_bytes)))
        for op in plan.operands:
            em.smem_operands[op.name] = b.add(stage_base, I32(op.offset))
        b.store(b.add(start, b.mul(b.zext(it, I64), I64(loop.step))), em.scalar_slot(loop.var))
        em.stmts([s for s in loop.body if not (isinstance(s, ir.Assign) and s.name in plan.names)])
        # every warpgroup is past the previous step's wgmmas (wait_group 1 in the mma): refill its stage
        barrier(b)
        refill = b.sub(b.add(it, I32(plan.stages)), I32(1))
        with b.if_then(b.and_(producer, b.and_(b.icmp_signed(">", it, I32(0)), b.icmp_signed("<", refill, trips)))):
            issue(refill)
    for op in plan.operands:
        em.smem_operands.pop(op.name, None)
    b.store(b.add(first, trips), ring.steps)
    slots = em.tile_slots(plan.acc)
    regs = wgmma.wait(b, 0, [b.load(slot) for slot in slots])
    for slot, reg in zip(slots, regs):
        b.store(reg, slot)
