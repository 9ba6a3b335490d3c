"""``wgmma.mma_async`` and its fence, commit and wait, as inline PTX tied to the accumulators.

LLVM has no wgmma intrinsic. Each instruction is inline PTX whose
accumulator registers are outputs tied to inputs (``"=f"`` ... and ``"0"``
...), the form clang gives ``"+f"``: so ``wgmma.fence`` and
``wgmma.wait_group`` take the accumulators too, and LLVM can move no read or
write of them across either -- an accumulator may not be touched between the
fence and the wait that retires the last wgmma writing it.
"""

from __future__ import annotations

import llvmlite.ir as lir

from buildtile.backends.common.llvm import F32T, I32, VOID, asm
from buildtile.backends.tile import ir
from buildtile.backends.tile.exchange import TileVal
from buildtile.backends.tile.hopper import descriptors as desc
from buildtile.backends.tile.hopper.select import WARPGROUP
from buildtile.backends.tile.layout import log2
from buildtile.backends.tile.types import BF16, Scalar


def _tied(b: lir.IRBuilder, text: str, regs: list[lir.Value], inputs: list[lir.Value] = (),
          input_constraints: str = "") -> list[lir.Value]:
    """``text`` over ``regs`` as read-written f32 operands ``$0 ..``, then ``inputs`` (numbered after)."""
    n = len(regs)
    constraints = ",".join(["=f"] * n + ([input_constraints] if input_constraints else [])
                           + [str(k) for k in range(n)])
    ret = lir.LiteralStructType([F32T] * n)
    out = asm(b, ret, text, constraints, list(inputs) + list(regs), side_effect=True)
    return [b.extract_value(out, k) for k in range(n)]


def fence(b: lir.IRBuilder, regs: list[lir.Value]) -> list[lir.Value]:
    """``wgmma.fence``: register writes before it (the accumulators') are seen by the wgmma after it."""
    return _tied(b, "wgmma.fence.sync.aligned;", regs)


def commit(b: lir.IRBuilder) -> None:
    """``wgmma.commit_group``: the wgmmas issued since the last commit form one group."""
    asm(b, VOID, "wgmma.commit_group.sync.aligned;", "~{memory}", [], side_effect=True)


def wait(b: lir.IRBuilder, pending: int, regs: list[lir.Value]) -> list[lir.Value]:
    """``wgmma.wait_group pending``: all but the last ``pending`` groups are done, their
    accumulators written and their shared-memory reads over."""
    return _tied(b, f"wgmma.wait_group.sync.aligned {pending};", regs)


def mma_async(b: lir.IRBuilder, dtype: Scalar, n: int, a_desc: lir.Value, b_desc: lir.Value,
              regs: list[lir.Value]) -> list[lir.Value]:
    """``d += a @ b`` for one 64 x ``n`` block: ``regs`` are its ``n / 2`` accumulators in this thread.
    A is K-major (no transpose), B MN-major (imm-trans-b 1); scale-d 1 keeps the accumulator."""
    count = len(regs)
    assert count == n // 2
    kind = "bf16" if dtype == BF16 else "f16"
    outs = ", ".join(f"${k}" for k in range(count))
    text = (f"{{ .reg .pred p; setp.ne.b32 p, ${count + 2}, 0; "
            f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{kind}.{kind} {{{outs}}}, ${count}, ${count + 1}, "
            "p, 1, 1, 0, 1; }")
    return _tied(b, text, regs, [a_desc, b_desc, I32(1)], "l,l,r")


def emit_mma(em, e: ir.Mma) -> TileVal:
    """``acc += a @ b`` over the operand tiles of the current stage (``em.smem_operands``: their
    shared addresses), one group of wgmmas: each warpgroup its 64-row blocks, K in steps of 16.
    Leaves the newest group in flight (``wait_group 1``): the previous step's is done after it."""
    plan = em.plan.hopper
    b = em.b
    acc = list(em.tile_in(e.acc, e.layout).regs)
    a_base, b_base = em.smem_operands[e.a.name], em.smem_operands[e.b.name]
    group = b.lshr(em.tid, I32(log2(WARPGROUP)))          # this thread's warpgroup
    a_const = desc.a_descriptor_constant(plan.a.panels)
    b_const = desc.b_descriptor_constant(plan.b.panels)
    block_regs = plan.n // 2
    acc = fence(b, acc)
    for ks in range(plan.k_steps):
        b_desc = desc.descriptor(b, b.add(b_base, I32(desc.b_offset(plan.b.panels, ks))), b_const)
        for rb in range(plan.row_blocks):
            first_row_block = b.add(b.mul(group, I32(plan.row_blocks)), I32(rb))
            a_addr = b.add(a_base, b.add(b.mul(first_row_block, I32(desc.MMA_M * plan.a.panels.width)),
                                         I32(desc.a_offset(plan.a.panels, 0, ks))))
            a_desc = desc.descriptor(b, a_addr, a_const)
            part = slice(rb * block_regs, (rb + 1) * block_regs)
            acc[part] = mma_async(b, e.a.ty.dtype, plan.n, a_desc, b_desc, acc[part])
    commit(b)
    acc = wait(b, 1, acc)
    return TileVal(e.layout, acc, e.ty.dtype)


__all__ = ["commit", "emit_mma", "fence", "mma_async", "wait"]
