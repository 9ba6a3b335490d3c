"""Stage 3: the lowering plan of one checked kernel (checked IR -> planned IR).

Three decisions, all made before any code is emitted:

* **threads** -- one block of 32 to 1024 threads per tile, chosen by the
  cost model of :func:`choose_threads` (docs/tile-planner.md) from the
  tile shapes, dtypes, reductions and register pressure of the
  specialization; with ``tile.mma``, one warp per 1024 accumulator elements
  (up to 8 warps).
* **layouts** -- every tile-valued node gets a :class:`~.layout.Layout`
  (``node.layout``). Layouts flow top-down from where they matter: a store
  asks for the coalesced :func:`~.layout.canonical` layout, an elementwise
  node for its operands' layout, ``mma`` for the tensor-core accumulator
  layout. Loads and constants adopt whatever layout is asked of them (a load
  can read any layout straight from memory), so data rarely moves between
  threads; where layouts still differ the emitter converts through shared
  memory. A name keeps one layout (see :func:`assign_layouts`), chosen so
  that loop-carried values -- mma accumulators, running reductions -- never
  move inside the loop.
* **pipelines** -- a ``tile.range`` loop whose body loads f16/bf16 tiles
  used only as ``mma`` operands is software-pipelined: those loads go
  straight to shared memory with ``cp.async``, several iterations ahead.
  Compiled for ``sm_90a``, a plain matmul loop takes the Hopper path
  instead (``hopper.select``): TMA copies into an mbarrier ring, wgmma, one
  or two warpgroups, and wgmma's accumulator layout.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from buildtile.backends.tile import ir
from buildtile.backends.tile.hopper.select import HOPPER_TARGET, HopperPlan, hopper_plan
from buildtile.backends.tile.layout import Layout, access_vector, canonical, log2, mma_accumulator
from buildtile.backends.tile.mma_operands import (
    OPERAND_ALIGN, SmemOperand, assignment_counts, find_resident, is_chained, mma_operand_uses, operand_load,
    operand_local, var_uses,
)
from buildtile.backends.tile.types import BOOL, TileT, elem_bytes

MIN_THREADS, MAX_THREADS = 32, 1024
#: bytes of the largest tile each thread should have in flight: four 16-byte accesses. Fewer
#: threads a block, each with more bytes, take fewer registers a block in all (each thread has
#: its own addresses and bounds), so more blocks share an SM and more loads are in flight there
#: (measured on an H200: bf16 rows of 4096 and 16384 moved 9-53% more at 64 bytes a thread
#: than at 32)
TARGET_THREAD_BYTES = 64
#: blocks larger than this only when registers demand it (smaller blocks pack SMs more evenly)
PREFERRED_MAX_THREADS = 256
#: registers a thread may take and still leave an SM 16 warps; 65536 an SM in all (sm_80+)
REGISTER_BUDGET = 128
REGISTERS_PER_SM = 65536
#: registers a thread needs besides tile data (addresses, bounds, masked paths, loop state),
#: as ptxas allocates them for the row kernels of the examples
REGISTER_OVERHEAD = 48
#: registers per thread that mma kernels are fitted into
MMA_REGISTERS = 128
#: accumulators per thread that still leave room in MMA_REGISTERS for fragments and addresses
MMA_ACCUMULATORS_SHARED = 64
#: shared memory the software pipeline of one loop may take (every sm_80+ GPU has more per block)
PIPELINE_BYTES = 96 * 1024
MAX_STAGES = 4
#: shared memory that operands loaded once and reused in loops (resident operands) may take
RESIDENT_BYTES = 64 * 1024
#: rows of a chained mma each warp takes (see ``mma_operands``): with fewer, every warp reads the
#: whole B operand from shared memory for too few rows
CHAINED_WARP_ROWS = 16


#: a load of a pipelined loop's body, copied into each stage at ``offset``
PipelinedOperand = SmemOperand


@dataclass
class Pipeline:
    loop: ir.ForRange
    operands: list[PipelinedOperand]
    stage_bytes: int
    stages: int

    @property
    def names(self) -> set[str]:
        return {op.name for op in self.operands}


@dataclass
class Plan:
    threads: int
    var_layouts: dict[str, Layout]
    pipelines: dict[int, Pipeline] = field(default_factory=dict)   # id(ForRange) -> its pipeline
    grouped_grid: bool = False      # visit 2-D tiles in groups of rows, for L2 reuse (mma kernels)
    min_blocks: int | None = None   # blocks per SM to fit registers for (PTX .minnctapersm)
    reduced: dict[tuple[int, ...], frozenset[int]] = field(default_factory=dict)  # tile shape -> axes reduced
    access: dict[tuple[int, ...], int] = field(default_factory=dict)   # tile shape -> narrowest element in memory
    hopper: HopperPlan | None = None  # the K loop through TMA and wgmma (sm_90a), instead of a pipeline
    resident: dict[str, SmemOperand] = field(default_factory=dict)  # mma operands loaded once, kept in smem
    mma_rows_only: bool = False     # every warp takes whole rows of each mma (a chained kernel)

    @property
    def pipeline_bytes(self) -> int:
        ring = self.hopper.shared_bytes if self.hopper is not None else 0
        return max([ring] + [p.stages * p.stage_bytes for p in self.pipelines.values()])

    @property
    def resident_bytes(self) -> int:
        return sum(r.nbytes for r in self.resident.values())

    @property
    def smem_operands(self) -> set[str]:
        names = {name for p in self.pipelines.values() for name in p.names} | set(self.resident)
        return names | (self.hopper.names if self.hopper is not None else set())


def make_plan(kernel: ir.KernelIR, target: str | None = None) -> Plan:
    """The plan of ``kernel``; for ``target`` sm_90a, with the Hopper K loop where it applies."""
    threads = choose_threads(kernel)
    pipelines = find_pipelines(kernel)
    hopper = hopper_plan(kernel, pipelines) if target == HOPPER_TARGET else None
    resident = find_resident(kernel, RESIDENT_BYTES)
    uses_mma = any(isinstance(e, ir.Mma) for e in ir.walk_exprs(kernel.body))
    rows_only = uses_mma and is_chained(kernel)

    def accumulator(m: int, n: int, threads: int) -> Layout:
        return mma_accumulator(m, n, threads, rows_only)
    if hopper is not None:
        threads, pipelines, resident = hopper.threads, {}, {}
        def accumulator(m: int, n: int, threads: int) -> Layout:   # the kernel's one mma
            return hopper.accumulator_layout()
    smem = {name for p in pipelines.values() for name in p.names} | set(resident) | \
        (hopper.names if hopper is not None else set())
    reduced = reduced_axes(kernel)
    var_layouts = assign_layouts(kernel, threads, smem, reduced, access_bytes(kernel), accumulator)
    rank = next(iter(len(s) for s in kernel.tile_shapes.values()), 0)
    # a wgmma kernel takes the registers its accumulators need (one block an SM); no budget below that
    min_blocks = 1 if hopper is not None else _mma_min_blocks(kernel, threads, rows_only) if uses_mma else None
    return Plan(threads, var_layouts, pipelines, grouped_grid=uses_mma and rank == 2, min_blocks=min_blocks,
                reduced=reduced, access=access_bytes(kernel), hopper=hopper, resident=resident,
                mma_rows_only=rows_only)


def _mma_min_blocks(kernel: ir.KernelIR, threads: int, chained: bool = False) -> int:
    """Blocks per SM to fit registers for. Small warp tiles (up to 64 accumulators a thread) fit
    in 128 registers, so several blocks share an SM and hide each other's latency. Larger warp
    tiles (64 x 64: 128 accumulators) take one block and up to 255 registers: at 128 ptxas would
    reload each fragment just before its mma, exposing every ldmatrix latency. A chained kernel
    holds the accumulators of all its mmas at once (a score block and the output it updates)."""
    sizes = {e.ty.shape: e.ty.shape[0] * e.ty.shape[1] for e in ir.walk_exprs(kernel.body) if isinstance(e, ir.Mma)}
    acc = sum(sizes.values()) if chained else max(sizes.values())
    if acc // threads > MMA_ACCUMULATORS_SHARED:
        return 1
    return max(1, 65536 // (threads * MMA_REGISTERS))


# ------------------------------------------------------------------ threads


def choose_threads(kernel: ir.KernelIR) -> int:
    """The block size of one specialization: mma kernels one warp per 1024 accumulators (a
    chained kernel at least ``CHAINED_WARP_ROWS`` rows a warp); any other kernel the candidate
    (a power of two, 32 to 1024) of least :func:`thread_cost`."""
    mmas = [e for e in ir.walk_exprs(kernel.body) if isinstance(e, ir.Mma)]
    if mmas:
        m, n = max((e.ty.shape for e in mmas), key=lambda s: s[0] * s[1])
        warps = min(8, max(1, m * n // 1024))
        if is_chained(kernel):
            rows = min(e.ty.shape[0] for e in mmas)
            warps = max(1, min(warps, rows // CHAINED_WARP_ROWS))
        return 32 * warps
    fp = tile_footprint(kernel)
    candidates = [MIN_THREADS << k for k in range(log2(MAX_THREADS // MIN_THREADS) + 1)]
    return min(candidates, key=lambda t: thread_cost(fp, t))


@dataclass(frozen=True)
class TileFootprint:
    """What the cost model reads of a specialization."""

    elements: int                 # of its largest tile
    words: float                  # 32-bit registers an element of that tile takes
    live: float                   # tile data held at once, at most, in units of the largest tile
    memory_bytes: int             # the narrowest element that tile moves to or from memory
    #: whether that tile is loaded in a loop, the next iteration's load in flight while one
    #: is worked on: each thread then has its share in flight twice over
    overlapped: bool
    #: (shape, axis, elem bytes, every axis reduced in tiles of that shape, values carried: 2 for
    #: an index reduction, whose index travels with the value) of each reduction
    reductions: tuple[tuple[tuple[int, ...], int, int, frozenset[int], int], ...]


def tile_footprint(kernel: ir.KernelIR) -> TileFootprint:
    tiles = [e.ty for e in ir.walk_exprs(kernel.body) if isinstance(e.ty, TileT)]
    # an output's own tile counts where the block stores it whole; one written only in chunks is
    # never held, and its chunks are among the tiles above
    whole = {s.param for s in ir.walk_stmts(kernel.body) if isinstance(s, ir.Store) and s.index is None}
    tiles += [TileT(None, s) for name, s in kernel.tile_shapes.items() if name in whole or not tiles]
    elements = max((t.size for t in tiles), default=1)
    largest = {t.shape for t in tiles if t.size == elements}
    access = access_bytes(kernel)
    compute = max((elem_bytes(t.dtype) for t in tiles if t.size == elements and t.dtype is not None), default=4)
    memory = min((access[shape] for shape in largest if shape in access), default=compute)
    overlapped = _loaded_in_loops(kernel, largest)
    # computed wider than it is loaded, in a loop: the next chunk's narrow registers are held while
    # this one's wide values are worked on
    words = max(1, compute // 4) + (memory / 4 if memory < compute and overlapped else 0)
    reduced = reduced_axes(kernel)
    reductions = tuple((e.value.ty.shape, e.axis, min(elem_bytes(e.value.ty.dtype), access.get(e.value.ty.shape, 8)),
                        reduced[e.value.ty.shape], e.carried)
                       for e in ir.walk_exprs(kernel.body) if isinstance(e, ir.Reduce))
    return TileFootprint(elements, words, _live_tiles(kernel, elements), memory, overlapped, reductions)


def registers(fp: TileFootprint, threads: int) -> int:
    """The registers a thread of a ``threads``-thread block is expected to take."""
    return REGISTER_OVERHEAD + int(fp.live * max(1, fp.elements // threads) * fp.words)


def thread_cost(fp: TileFootprint, threads: int) -> tuple:
    """The cost of ``threads`` threads a block, compared lexicographically:

    1. registers over budget: ``min(128, 65536 / threads)`` a thread (128 leaves an SM 16
       warps to hide latency with; past 255 they spill to local memory);
    2. reductions whose axis spans several warps (each a shared-memory round trip between
       two barriers, where one inside a warp takes only shuffles), counted per value carried
       (an argmax moves its index with its value: twice the shuffles and shared memory);
    3. whether the block is larger than it needs to be (past 256 threads: blocks of 1024
       leave an SM with two);
    4. how far the bytes each thread has in flight of the largest tile (its share, twice
       over where that tile is loaded in a loop) are from four 16-byte accesses (fewer leave
       too few loads in flight, more lengthen each thread's serial work);
    5. fewer threads.
    """
    per_thread = max(1, fp.elements // threads)
    spilled = max(0, registers(fp, threads) - min(REGISTER_BUDGET, REGISTERS_PER_SM // threads))
    across_warps = sum(carried for shape, axis, eb, axes, carried in fp.reductions
                       if reduction_strategy(canonical(shape, threads, eb, axes), axis) == "block")
    oversized = max(0, threads - PREFERRED_MAX_THREADS)
    thread_bytes = per_thread * fp.memory_bytes * (2 if fp.overlapped else 1)
    spread = abs(log2(max(1, thread_bytes)) - log2(TARGET_THREAD_BYTES))
    if thread_bytes < TARGET_THREAD_BYTES and threads > MIN_THREADS:
        spread += 1        # too few bytes in flight: worse than too many
    return (spilled, across_warps, oversized, spread, threads)


def reduction_strategy(layout: Layout, axis: int) -> str:
    """How a reduction along ``axis`` of a tile in ``layout`` combines: ``"thread"`` (registers
    only), ``"warp"`` (then butterfly shuffles) or ``"block"`` (then one exchange of the warps'
    partial results through shared memory)."""
    holders = [k for k, bit in enumerate(layout.thread) if bit is not None and bit[0] == axis]
    if any(k >= 5 for k in holders):
        return "block"
    return "warp" if holders else "thread"


def access_bytes(kernel: ir.KernelIR) -> dict[tuple[int, ...], int]:
    """For each tile shape, the narrowest element any load or store of that shape moves. Tiles of
    that shape give each thread runs of 16 bytes of that element, so a kernel that reads bf16 and
    computes in f32 still reads 16 bytes an access (its f32 tiles hold two registers' worth)."""
    out: dict[tuple[int, ...], int] = {}

    def note(shape, eb):
        out[shape] = min(out.get(shape, eb), eb)
    for e in ir.walk_exprs(kernel.body):
        if isinstance(e, ir.Load):
            note(e.ty.shape, elem_bytes(kernel.param_types[e.param].elem))
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.Store) and isinstance(s.value.ty, TileT):
            note(s.value.ty.shape, elem_bytes(kernel.param_types[s.param].elem))
    return out


def reduced_axes(kernel: ir.KernelIR) -> dict[tuple[int, ...], frozenset[int]]:
    """For each tile shape, the axes some reduction of a tile of that shape combines along."""
    out: dict[tuple[int, ...], set[int]] = defaultdict(set)
    for e in ir.walk_exprs(kernel.body):
        if isinstance(e, ir.Reduce):
            out[e.value.ty.shape].add(e.axis)
    return {shape: frozenset(axes) for shape, axes in out.items()}


def _live_tiles(kernel: ir.KernelIR, elements: int) -> float:
    """The most tile data a thread holds at once, in units of ``elements``: over every statement,
    the tile locals live across it (assigned before, used after, on some path) plus the tile it
    computes (which takes the place of operands that die there). Backward liveness over the
    structured body: each branch of an ``if`` on its own, a loop's body until it is stable."""
    narrow = _narrow_shares(kernel)
    weight = {name: ty.size / elements * narrow.get(name, 1.0) for name, ty in kernel.locals.items()
              if isinstance(ty, TileT)}
    # a name every assignment of which LLVM can recompute where it is used holds no registers; one
    # also assigned a loaded or reduced value (an accumulator started at zeros) holds them
    held = {s.name for s in ir.walk_stmts(kernel.body) if isinstance(s, ir.Assign) and not _recomputable(s.value)}
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.Assign) and s.name not in held:
            weight.pop(s.name, None)

    def uses(exprs) -> set[str]:
        return {e.name for e in ir.walk_exprs(list(exprs)) if isinstance(e, ir.Var) and e.name in weight}

    def built(s: ir.Stmt) -> float:
        value = s.value if isinstance(s, (ir.Assign, ir.Store)) else None
        if value is None or not isinstance(value.ty, TileT) or (isinstance(s, ir.Assign) and s.name not in weight):
            return 0.0
        if isinstance(s, ir.Assign) and isinstance(value, ir.Var):
            return 0.0      # a copy (a helper's parameter bound to its argument) builds nothing
        return value.ty.size / elements

    def block(stmts: list[ir.Stmt], live_after: set[str]) -> tuple[set[str], float]:
        live, peak = set(live_after), 0.0
        for s in reversed(stmts):
            if isinstance(s, ir.If):
                then_live, then_peak = block(s.then, live)
                else_live, else_peak = block(s.orelse, live)
                peak = max(peak, then_peak, else_peak)
                live = then_live | else_live | uses([s.cond])
            elif isinstance(s, ir.ForRange):
                body_live, body_peak = block(s.body, live)
                body_live, body_peak = block(s.body, live | body_live)     # values carried round the loop
                peak = max(peak, body_peak)
                live = live | body_live | uses([s.start, s.stop])
            else:
                defined = {s.name} if isinstance(s, ir.Assign) else set()
                peak = max(peak, sum(weight[n] for n in live - defined) + built(s))
                live = (live - defined) | uses(c for c in ir.children(s) if isinstance(c, ir.Expr))
        return live, peak

    return max(1.0, block(kernel.body, set())[1])


def _loaded_in_loops(kernel: ir.KernelIR, shapes: set[tuple[int, ...]]) -> bool:
    """Whether a tile of one of ``shapes`` is loaded in a ``tile.range`` body (a streamed walk,
    whose first load may come before the loop)."""
    return any(isinstance(e, ir.Load) and e.ty.shape in shapes
               for s in ir.walk_stmts(kernel.body) if isinstance(s, ir.ForRange) for e in ir.walk_exprs(s.body))


def _narrow_shares(kernel: ir.KernelIR) -> dict[str, float]:
    """The share of its computed width that each local holds while live, where it is less than
    all of it: a narrow load converted wider (``tile.load(w, ...).astype(f32)`` of bf16 data)
    stays in its loaded registers until each element's one use converts it. A local with any
    other assignment holds its full width."""
    shares: dict[str, float] = {}
    for s in ir.walk_stmts(kernel.body):
        if not isinstance(s, ir.Assign):
            continue
        v = s.value
        if isinstance(v, ir.Cast) and isinstance(v.value, ir.Load) and isinstance(v.ty, TileT):
            share = elem_bytes(kernel.param_types[v.value.param].elem) / elem_bytes(v.ty.dtype)
        else:
            share = 1.0
        shares[s.name] = max(shares.get(s.name, 0.0), min(1.0, share))
    return shares


def _recomputable(e: ir.Expr) -> bool:
    """Built from indices, scalars and smaller tiles alone (a ``tile.arange`` mask, a comparison
    with a broadcast column): LLVM recomputes such a tile where it is used rather than hold it."""
    return not any(isinstance(c, (ir.Load, ir.Reduce, ir.Mma))
                   or (isinstance(c, ir.Var) and isinstance(c.ty, TileT) and c.ty.size >= e.ty.size)
                   for c in ir.walk_exprs(e))


# ------------------------------------------------------------------ software pipelines


def find_pipelines(kernel: ir.KernelIR) -> dict[int, Pipeline]:
    """Loops whose mma operands (see ``mma_operands``) are loaded in their body from indices the
    body does not compute: those loads are copied into a ring of shared-memory stages, issued
    ahead."""
    uses = var_uses(kernel.body)
    assigns = assignment_counts(kernel.body)
    found = {}
    for loop in (s for s in ir.walk_stmts(kernel.body) if isinstance(s, ir.ForRange)):
        if not (isinstance(loop.step, int) and loop.step > 0):
            continue   # a pipeline runs ahead by constant steps upward
        changing = {s.name for s in ir.walk_stmts(loop.body) if isinstance(s, ir.Assign)} | {loop.var} | {
            s.var for s in ir.walk_stmts(loop.body) if isinstance(s, ir.ForRange)}
        operands, offset = [], 0
        for k, stmt in enumerate(loop.body):
            load = operand_load(stmt.value) if isinstance(stmt, ir.Assign) else None
            if load is None or assigns[stmt.name] != 1:
                continue
            index_names = {e.name for e in ir.walk_exprs(load.index) if isinstance(e, ir.Var)}
            if index_names & (changing - {loop.var}):
                continue   # its index depends on something the body computes: cannot be issued ahead
            later = loop.body[k + 1:]
            as_operand = mma_operand_uses(later)[stmt.name]
            if not as_operand or as_operand != len(uses[stmt.name]) \
                    or any(not _inside(u, later) for u in uses[stmt.name]):
                continue
            operand = PipelinedOperand(stmt.name, load, offset)
            operands.append(operand)
            offset += operand.nbytes
        if operands:
            stages = min(MAX_STAGES, PIPELINE_BYTES // offset)
            if stages >= 2:
                found[id(loop)] = Pipeline(loop, operands, offset, stages)
    # a loop nested in a pipelined loop keeps its loads: the outer pipeline owns the shared memory
    for pipe in list(found.values()):
        for inner in ir.walk_stmts(pipe.loop.body):
            found.pop(id(inner), None)
    return found


def _inside(expr: ir.Expr, stmts: list[ir.Stmt]) -> bool:
    return any(e is expr for e in ir.walk_exprs(stmts))


# ------------------------------------------------------------------ layouts


def assign_layouts(kernel: ir.KernelIR, threads: int, smem: set[str],
                   reduced: dict[tuple[int, ...], frozenset[int]] | None = None,
                   access: dict[tuple[int, ...], int] | None = None,
                   accumulator: Callable[[int, int, int], Layout] = mma_accumulator) -> dict[str, Layout]:
    """Annotate every tile node with its layout; returns the layout of every tile local.

    A local's layout: an mma accumulator's; else, if some value assigned to it cannot be
    built in another layout without moving data (a reduction, an update of itself in a
    loop), the natural layout of the last such value; else the one its uses all ask for;
    else its first value's. Decided on passes where assignments take their natural layouts,
    except those of *free* locals (every value of theirs built from indices, constants and
    other free locals, such as a mask), which take the layout their uses asked for: so a mask
    named once and used where a score tile is is built in the score tile's layout, from
    indices built there too.
    """
    seeds: dict[str, Layout] = {}
    for stmt in ir.walk_stmts(kernel.body):
        if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Mma):
            m, n = stmt.value.ty.shape
            seeds.setdefault(stmt.name, accumulator(m, n, threads))
    fixed = dict(seeds)
    free = _free_locals(kernel, set(fixed) | smem)
    for _ in range(6):
        natural = _Assigner(kernel, threads, seeds, smem, reduced or {}, access or {}, natural=True,
                            accumulator=accumulator, free=free)
        natural.run()
        chosen = dict(fixed)
        for name, defs in natural.defs.items():
            if name in fixed:
                continue
            inflexible = [layout for value, layout in defs if not _flexible(value, free)]
            wants = natural.demands.get(name, [])
            if inflexible:
                chosen[name] = inflexible[-1]
            elif wants and len(set(wants)) == 1:
                chosen[name] = wants[0]
        if chosen == seeds:
            break
        seeds = chosen
    final = _Assigner(kernel, threads, seeds, smem, reduced or {}, access or {}, natural=False,
                      accumulator=accumulator, free=free)
    final.run()
    return final.var_layouts


def _flexible(e: ir.Expr, free: frozenset[str] = frozenset()) -> bool:
    """Whether ``e`` is built directly in any layout asked of it (no data moves); a read of a
    ``free`` local is, as the local takes the layout asked of it."""
    if isinstance(e, (ir.Load, ir.Full, ir.Arange, ir.Splat)):
        return True
    if isinstance(e, ir.Var):
        return e.name in free
    if isinstance(e, (ir.Reduce, ir.Mma)):
        return False
    return all(_flexible(c, free) for c in ir.children(e) if isinstance(c, ir.Expr) and isinstance(c.ty, TileT))


def _free_locals(kernel: ir.KernelIR, fixed: set[str]) -> frozenset[str]:
    """Tile locals whose every value is :func:`_flexible` (through other such locals): indices
    and masks, which can be built in whatever layout their uses ask for."""
    defs: dict[str, list[ir.Expr]] = defaultdict(list)
    for stmt in ir.walk_stmts(kernel.body):
        if isinstance(stmt, ir.Assign) and isinstance(stmt.value.ty, TileT) and stmt.name not in fixed:
            defs[stmt.name].append(stmt.value)
    free: frozenset[str] = frozenset()
    while True:
        grown = frozenset(n for n, values in defs.items() if all(_flexible(v, free) for v in values))
        if grown == free:
            return free
        free = grown


_WEAK_OPERANDS = (ir.Splat, ir.Full, ir.Broadcast, ir.Arange)
#: which operand an elementwise node takes its layout from, when nothing asks for one:
#: results that cannot move for free (reductions, mma), then data, then masks; never constants
_ANCHOR_RANKS = ("anchor", "data", "mask")


def _anchor_rank(e: ir.Expr) -> int:
    if isinstance(e, _WEAK_OPERANDS):
        return len(_ANCHOR_RANKS)
    if isinstance(e, (ir.Reduce, ir.Mma)):
        return 0
    if _from_anchor(e):
        return 0
    return 2 if e.ty.dtype == BOOL else 1


def _from_anchor(e: ir.Expr) -> bool:
    """An elementwise value of a reduction or an mma and constants alone (``tile.max(s, axis=1) *
    scale``): it is built in their layout, so it anchors as they do."""
    if isinstance(e, (ir.Reduce, ir.Mma)):
        return True
    if isinstance(e, (ir.Var, ir.Load, ir.Broadcast, ir.ExpandDims, ir.Reshape, ir.Permute) + _WEAK_OPERANDS):
        return False
    operands = [c for c in ir.children(e) if isinstance(c, ir.Expr) and isinstance(c.ty, TileT)]
    strong = [c for c in operands if not isinstance(c, _WEAK_OPERANDS)]
    return bool(strong) and all(_from_anchor(c) for c in strong)


class _Assigner:
    """One pass over the kernel giving every tile node a layout.

    With ``natural`` an assignment does not ask its value for the local's layout, so
    ``defs`` records each value's own (natural) layout, for :func:`assign_layouts` to choose.
    """

    def __init__(self, kernel: ir.KernelIR, threads: int, seeds: dict[str, Layout], smem: set[str],
                 reduced: dict[tuple[int, ...], frozenset[int]], access: dict[tuple[int, ...], int],
                 natural: bool, accumulator: Callable[[int, int, int], Layout] = mma_accumulator,
                 free: frozenset[str] = frozenset()) -> None:
        self.kernel = kernel
        self.accumulator = accumulator
        self.reduced = reduced
        self.access = access
        self.threads = threads
        self.var_layouts = dict(seeds)
        self.smem = smem
        self.natural = natural
        self.free = free
        self.demands: dict[str, list[Layout]] = defaultdict(list)
        self.defs: dict[str, list[tuple[ir.Expr, Layout]]] = defaultdict(list)

    def canonical(self, ty: TileT, eb: int | None = None) -> Layout:
        eb = elem_bytes(ty.dtype) if eb is None else eb
        # masks take the runs of the data they select between; data the runs of its narrowest access
        eb = self.access.get(ty.shape, eb) if ty.dtype == BOOL else min(eb, self.access.get(ty.shape, eb))
        return canonical(ty.shape, self.threads, eb, self.reduced.get(ty.shape, frozenset()))

    def run(self) -> None:
        self.stmts(self.kernel.body)

    def stmts(self, stmts: list[ir.Stmt]) -> None:
        for s in stmts:
            if isinstance(s, ir.Assign) and isinstance(s.value.ty, TileT):
                if s.name in self.smem:
                    continue
                asked = None if self.natural and s.name not in self.free else self.var_layouts.get(s.name)
                produced = self.expr(s.value, asked)
                self.defs[s.name].append((s.value, produced))
                self.var_layouts.setdefault(s.name, produced)
            elif isinstance(s, ir.Store) and isinstance(s.value.ty, TileT):
                # a store takes any layout: the coalesced one is only a hint, for values that are free to take it
                out = self.kernel.param_types[s.param]
                hint = self.canonical(s.value.ty, elem_bytes(out.elem)) if _flexible(s.value, self.free) else None
                self.expr(s.value, hint)
            elif isinstance(s, ir.If):
                self.stmts(s.then)
                self.stmts(s.orelse)
            elif isinstance(s, ir.ForRange):
                self.stmts(s.body)

    def expr(self, e: ir.Expr, want: Layout | None) -> Layout:
        if want is not None and want.shape != e.ty.shape:
            want = None
        layout = self._expr(e, want)
        assert layout.shape == e.ty.shape, (e, layout)
        e.layout = layout
        return layout

    def _expr(self, e: ir.Expr, want: Layout | None) -> Layout:
        if isinstance(e, ir.Var):
            layout = self.var_layouts.get(e.name)
            if layout is None:      # read before its first assignment in program order (a loop)
                layout = self.var_layouts[e.name] = self.canonical(e.ty)
            if want is not None:
                self.demands[e.name].append(want)
            return layout
        if isinstance(e, (ir.Load, ir.Full, ir.Arange, ir.Splat)):
            return want or self.canonical(e.ty)
        if isinstance(e, ir.Broadcast):
            layout = want or self.canonical(e.ty)
            self.expr(e.value, layout.broadcast_from(e.value.ty.shape))
            return layout
        if isinstance(e, ir.ExpandDims):
            return self.expr(e.value, want.squeeze(e.axis) if want else None).expand(e.axis)
        if isinstance(e, ir.Reshape):
            return self.expr(e.value, want.reshape(e.value.ty.shape) if want else None).reshape(e.ty.shape)
        if isinstance(e, ir.Permute):
            return self.expr(e.value, want.inverse_permute(e.perm) if want else None).permute(e.perm)
        if isinstance(e, ir.Reduce):
            return self.expr(e.value, None).slice(e.axis)
        if isinstance(e, ir.Mma):
            m, n = e.ty.shape
            layout = self.accumulator(m, n, self.threads)
            self.expr(e.acc, layout)
            for operand in (e.a, e.b):
                local = operand_local(operand)
                if local is None or local[0] not in self.smem:
                    self.expr(operand, None)
            return layout
        # elementwise: BinOp, Compare, UnaryOp, Cast, Math, Where -- operands have the result's shape
        operands = [c for c in ir.children(e) if isinstance(c, ir.Expr) and isinstance(c.ty, TileT)]
        layout, strong = want, None
        if layout is None:
            strong = min(operands, key=_anchor_rank)
            if _anchor_rank(strong) < len(_ANCHOR_RANKS):
                layout = self.expr(strong, None)
            else:
                strong, layout = None, self.canonical(e.ty)
        for c in operands:
            if c is not strong:
                self.expr(c, layout)
        return layout


@dataclass(frozen=True)
class PlanSummary:
    """The planner's choices for one specialization, in the terms of its cost model."""

    threads: int
    vector_bytes: int                   # the narrowest access to the largest tiles (16: 128-bit)
    reductions: tuple[str, ...]         # each reduction's strategy, in program order

    def row(self) -> tuple:
        return (self.threads, self.vector_bytes, self.reductions)


def summarize(kernel: ir.KernelIR, plan: Plan) -> PlanSummary:
    """What :func:`make_plan` chose for ``kernel`` (every node annotated), in brief."""
    accesses = []      # (elements, bytes per access) of every global access
    for e in ir.walk_exprs(kernel.body):
        if isinstance(e, ir.Load) and e.layout is not None:     # (pipelined operands go to shared memory)
            eb = elem_bytes(kernel.param_types[e.param].elem)
            accesses.append((e.ty.size, access_vector(e.layout, eb) * eb))
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.Store) and isinstance(s.value.ty, TileT):
            eb = elem_bytes(kernel.param_types[s.param].elem)
            accesses.append((s.value.ty.size, access_vector(s.value.layout, eb) * eb))
    largest = max((n for n, _ in accesses), default=0)
    narrowest = min((v for n, v in accesses if n == largest), default=0)
    strategies = []
    for s in ir.walk_stmts(kernel.body):
        for e in ir.walk_exprs([c for c in ir.children(s) if isinstance(c, ir.Expr)]):
            if isinstance(e, ir.Reduce):
                strategies.append(reduction_strategy(e.value.layout, e.axis))
    return PlanSummary(plan.threads, narrowest, tuple(strategies))


def describe(plan: Plan) -> str:
    """A human-readable summary, for debugging and ``inspect``."""
    lines = [f"threads: {plan.threads}"]
    for name, layout in sorted(plan.var_layouts.items()):
        lines.append(f"  {name}: regs {layout.nregs} {layout.reg} threads {layout.thread}")
    for p in plan.pipelines.values():
        lines.append(f"  pipeline over `{p.loop.var}`: {p.stages} stages of {p.stage_bytes} bytes "
                     f"({', '.join(op.name for op in p.operands)})")
    for r in plan.resident.values():
        lines.append(f"  resident `{r.name}`: {r.rows} x {r.cols} in shared memory")
    return "\n".join(lines)


__all__ = ["Pipeline", "PipelinedOperand", "Plan", "PlanSummary", "choose_threads", "describe", "make_plan",
           "reduction_strategy", "summarize", "thread_cost"]
