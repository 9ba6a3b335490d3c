"""Which kernels take the Hopper path, and how: the planner's decision for ``sm_90a``.

A kernel qualifies when it has exactly one ``tile.mma``, inside a loop the
software pipeliner took (plan.find_pipelines), and that loop is the plain
matmul step::

    for k in tile.range(...):
        ta = tile.load(a, (..., ...), (M, K))     # a: Tensor[f16|bf16, 2]
        tb = tile.load(b, (..., ...), (K, N))     # b: Tensor[f16|bf16, 2]
        acc = tile.mma(ta, tb, acc)               # acc: f32 (M, N)

with shapes ``wgmma`` and the copy engine take (see the package docstring).
Anything else keeps the sm_80 lowering, which is also compiled into the
sm_90a image.
"""

from __future__ import annotations

from dataclasses import dataclass

from buildtile.backends.tile import ir
from buildtile.backends.tile.hopper.descriptors import MMA_K, MMA_M, PANEL_ALIGN, Panels, panel_width
from buildtile.backends.tile.layout import Layout, log2
from buildtile.backends.tile.types import BF16, F16, F32, TileT

#: the target this path compiles for (wgmma is arch-specific: no other target has it)
HOPPER_TARGET = "sm_90a"
#: a warpgroup: the threads that issue one wgmma together
WARPGROUP = 128
#: consumer warpgroups per block, at most
MAX_WARPGROUPS = 2
#: accumulators a thread may hold (wgmma m64n256 gives 128; more leaves no registers for the rest)
MAX_ACCUMULATORS = 128
#: the widest wgmma (n) and the widest TMA box
MAX_N = 256
MAX_BOX = 256
#: shared memory the ring of stages may take (an H100/H200 block has up to 227 KiB)
RING_BYTES = 160 * 1024
MIN_STAGES, MAX_STAGES = 2, 8
#: bytes of one mbarrier
BARRIER_BYTES = 8


@dataclass(frozen=True)
class TmaOperand:
    """One mma operand that the copy engine loads each K step."""

    name: str                 # the loop body's local bound to the load
    load: ir.Load
    panels: Panels
    offset: int               # byte offset of its tile in a stage
    map_index: int            # which of the kernel's tensor-map parameters describes its array


@dataclass(frozen=True)
class HopperPlan:
    """The Hopper lowering of a kernel's K loop."""

    loop: ir.ForRange
    mma: ir.Mma
    acc: str                  # the accumulator local
    a: TmaOperand
    b: TmaOperand
    warpgroups: int
    stages: int
    stage_bytes: int

    @property
    def threads(self) -> int:
        return WARPGROUP * self.warpgroups

    @property
    def m(self) -> int:
        return self.a.panels.rows

    @property
    def n(self) -> int:
        return self.b.panels.cols

    @property
    def k(self) -> int:
        return self.a.panels.cols

    @property
    def row_blocks(self) -> int:
        """64-row blocks of the accumulator each warpgroup computes."""
        return self.m // (MMA_M * self.warpgroups)

    @property
    def k_steps(self) -> int:
        return self.k // MMA_K

    @property
    def ring_bytes(self) -> int:
        return self.stages * self.stage_bytes

    @property
    def shared_bytes(self) -> int:
        """What the ring takes of the block's shared memory: the stages and their barriers, after
        up to PANEL_ALIGN bytes skipped to align the first stage."""
        return PANEL_ALIGN + self.ring_bytes + self.stages * BARRIER_BYTES

    @property
    def operands(self) -> tuple[TmaOperand, TmaOperand]:
        return (self.a, self.b)

    @property
    def names(self) -> set[str]:
        return {self.a.name, self.b.name}

    def accumulator_layout(self) -> Layout:
        return wgmma_accumulator(self.m, self.n, self.warpgroups)

    def maps(self) -> list[dict]:
        """The manifest's record of the tensor-map parameters, in parameter order: the array each
        describes, its box (innermost extent first, as the driver takes it) and swizzle."""
        return [{"param": op.load.param, "box": [op.panels.panel_cols, op.panels.rows],
                 "swizzle": op.panels.width} for op in self.operands]


def hopper_plan(kernel: ir.KernelIR, pipelines: dict) -> HopperPlan | None:
    """The Hopper lowering of ``kernel`` (given its sm_80 ``pipelines``), or None where it does not apply."""
    mmas = [e for e in ir.walk_exprs(kernel.body) if isinstance(e, ir.Mma)]
    if len(mmas) != 1 or len(pipelines) != 1:
        return None
    (pipe,) = pipelines.values()
    loop = pipe.loop
    if len(loop.body) != 3 or len(pipe.operands) != 2:
        return None
    first, second, step = loop.body
    mma = step.value if isinstance(step, ir.Assign) else None
    if not (isinstance(mma, ir.Mma) and mma is mmas[0] and isinstance(mma.acc, ir.Var) and mma.acc.name == step.name
            and isinstance(mma.a, ir.Var) and isinstance(mma.b, ir.Var)):
        return None
    by_name = {op.name: op for op in pipe.operands}
    if [s.name for s in (first, second) if isinstance(s, ir.Assign)] != [op.name for op in pipe.operands] \
            or set(by_name) != {mma.a.name, mma.b.name} or mma.a.name == mma.b.name:
        return None
    a_load, b_load = by_name[mma.a.name].load, by_name[mma.b.name].load
    if not _shapes_qualify(kernel, a_load, b_load, mma):
        return None
    m, k = a_load.ty.shape
    n = b_load.ty.shape[1]
    warpgroups = min(MAX_WARPGROUPS, m // MMA_M)
    if m * n // (WARPGROUP * warpgroups) > MAX_ACCUMULATORS:
        return None
    a_panels, b_panels = Panels(m, k), Panels(k, n)
    stage_bytes = a_panels.nbytes + b_panels.nbytes
    stages = min(MAX_STAGES, RING_BYTES // stage_bytes)
    if stages < MIN_STAGES:
        return None
    a = TmaOperand(mma.a.name, a_load, a_panels, 0, 0)
    b = TmaOperand(mma.b.name, b_load, b_panels, a_panels.nbytes, 1)
    return HopperPlan(loop, mma, step.name, a, b, warpgroups, stages, stage_bytes)


def _shapes_qualify(kernel: ir.KernelIR, a: ir.Load, b: ir.Load, mma: ir.Mma) -> bool:
    types = kernel.param_types
    arrays = [types.get(a.param), types.get(b.param)]
    if any(t is None or t.rank != 2 or t.is_out or t.atomic for t in arrays):
        return False
    dtype = a.ty.dtype
    if dtype not in (F16, BF16) or b.ty.dtype != dtype or not isinstance(mma.ty, TileT) or mma.ty.dtype != F32:
        return False
    if any(t.elem != dtype for t in arrays):
        return False
    (m, k), (k2, n) = a.ty.shape, b.ty.shape
    return (k == k2 and m % MMA_M == 0 and m <= MAX_BOX and k % MMA_K == 0 and k <= MAX_BOX and n <= MAX_N
            and panel_width(k) is not None and panel_width(n) is not None)


def wgmma_accumulator(m: int, n: int, warpgroups: int) -> Layout:
    """The register layout of wgmma m64nNk16 f32 accumulators (PTX ISA, "Register fragments:
    wgmma .m64nNk16"): in each warpgroup's 64-row block, warp ``w`` holds rows 16w..16w+15 as
    mma.sync's m16n8 C fragments side by side along N (lane = 4 * row + col / 2, registers
    (row, col), (row, col + 1), (row + 8, col), (row + 8, col + 1) per 8 columns); a warpgroup's
    further 64-row blocks follow in registers; warpgroups split M."""
    rows_per_group = m // warpgroups
    reg = [(1, 0), (0, 3)] + [(1, b) for b in range(3, log2(n))] + [(0, b) for b in range(6, log2(rows_per_group))]
    lanes = [(1, 1), (1, 2), (0, 0), (0, 1), (0, 2)]
    warps = [(0, 4), (0, 5)] + [(0, b) for b in range(log2(rows_per_group), log2(m))]
    return Layout((m, n), tuple(reg), tuple(lanes + warps))
