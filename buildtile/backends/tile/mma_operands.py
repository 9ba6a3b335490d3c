"""Where the operands of ``tile.mma`` come from, as the planner sees them.

An operand is read from shared memory when it is a local bound to a load that
the tensor cores can take as it is (an f16/bf16 tile whose axes before the
last two have extent 1, optionally reshaped to its last two axes, with zero
padding), used as ``a`` or ``b`` directly or transposed (``kt.T``). Such a
local is either loaded in a pipelined loop (``plan.find_pipelines``) or,
loaded once outside every loop, *resident*: copied into shared memory of its
own where it is assigned, and read from there by every mma that uses it (the
query block of an attention kernel, reused in every step of its loop).

An mma whose ``a`` operand is computed from another mma's result (the
probabilities of an attention step) is *chained*: a kernel with one plans
every mma with whole rows a warp, so that operand never leaves registers.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from buildtile.backends.tile import ir
from buildtile.backends.tile.types import MMA_DTYPES

#: the alignment of every shared-memory operand (bytes): a multiple of its row length, so that
#: the addresses of its fragments are one base per thread XOR and plus constants (see mma.py)
OPERAND_ALIGN = 1024


def operand_local(e: ir.Expr) -> tuple[str, bool] | None:
    """``(name, transposed)`` of an mma operand that reads a local as it is (``t`` or ``t.T``)."""
    if isinstance(e, ir.Var):
        return e.name, False
    if isinstance(e, ir.Permute) and e.perm == (1, 0) and isinstance(e.value, ir.Var):
        return e.value.name, True
    return None


def operand_load(value: ir.Expr) -> ir.Load | None:
    """The load ``value`` is, if the tensor cores can read it from a shared-memory copy: f16/bf16,
    zero padding, axes before the last two of extent 1 (reshaped away or not)."""
    load = value.value if isinstance(value, ir.Reshape) else value
    if not isinstance(load, ir.Load) or load.ty.dtype not in MMA_DTYPES or load.padding != 0:
        return None
    shape = load.ty.shape
    if len(shape) < 2 or any(n != 1 for n in shape[:-2]):
        return None
    if isinstance(value, ir.Reshape) and value.ty.shape != shape[-2:]:
        return None
    return load


def tile_rows_cols(load: ir.Load) -> tuple[int, int]:
    """The extents of the 2-D tile a shared-memory operand holds (the load's last two)."""
    return load.ty.shape[-2], load.ty.shape[-1]


def mma_operand_uses(body: list[ir.Stmt]) -> dict[str, int]:
    """For each local, how many times it is read as an mma operand (as it is or transposed)."""
    counts: dict[str, int] = defaultdict(int)
    for e in ir.walk_exprs(body):
        if isinstance(e, ir.Mma):
            for operand in (e.a, e.b):
                found = operand_local(operand)
                if found is not None:
                    counts[found[0]] += 1
    return counts


def var_uses(body: list[ir.Stmt]) -> dict[str, list[ir.Var]]:
    uses = defaultdict(list)
    for e in ir.walk_exprs(body):
        if isinstance(e, ir.Var):
            uses[e.name].append(e)
    return uses


def assignment_counts(body: list[ir.Stmt]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for stmt in ir.walk_stmts(body):
        if isinstance(stmt, ir.Assign):
            counts[stmt.name] += 1
    return counts


@dataclass
class SmemOperand:
    """A local whose load goes to shared memory: a pipeline stage's or a resident operand's."""

    name: str                # the local bound to the load
    load: ir.Load
    offset: int              # byte offset in its stage, or in the resident area

    @property
    def rows(self) -> int:
        return tile_rows_cols(self.load)[0]

    @property
    def cols(self) -> int:
        return tile_rows_cols(self.load)[1]

    @property
    def nbytes(self) -> int:
        return _align(self.rows * self.cols * 2, OPERAND_ALIGN)


def find_resident(kernel: ir.KernelIR, budget: int) -> dict[str, SmemOperand]:
    """Locals loaded once outside every loop and read only as mma operands, some of them inside
    a loop: each gets its own shared memory, up to ``budget`` bytes in all (in program order)."""
    assigns = assignment_counts(kernel.body)
    uses = var_uses(kernel.body)
    operand_uses = mma_operand_uses(kernel.body)
    in_loops = {e.name for loop in ir.walk_stmts(kernel.body) if isinstance(loop, ir.ForRange)
                for e in ir.walk_exprs(loop.body) if isinstance(e, ir.Var)}
    found, offset = {}, 0
    for stmt in _outside_loops(kernel.body):
        if not isinstance(stmt, ir.Assign) or assigns[stmt.name] != 1 or stmt.name not in in_loops:
            continue
        load = operand_load(stmt.value)
        if load is None or operand_uses[stmt.name] != len(uses[stmt.name]):
            continue
        operand = SmemOperand(stmt.name, load, offset)
        if offset + operand.nbytes > budget:
            break
        found[stmt.name] = operand
        offset += operand.nbytes
    return found


def _outside_loops(stmts: list[ir.Stmt]):
    for s in stmts:
        yield s
        if isinstance(s, ir.If):
            yield from _outside_loops(s.then)
            yield from _outside_loops(s.orelse)


def is_chained(kernel: ir.KernelIR) -> bool:
    """Whether some mma's ``a`` operand is computed from an mma's result (through locals)."""
    derived: set[str] = set()
    assigns = [s for s in ir.walk_stmts(kernel.body) if isinstance(s, ir.Assign)]

    def from_mma(e: ir.Expr) -> bool:
        return any(isinstance(c, ir.Mma) or (isinstance(c, ir.Var) and c.name in derived) for c in ir.walk_exprs([e]))

    changed = True
    while changed:
        changed = False
        for s in assigns:
            if s.name not in derived and from_mma(s.value):
                derived.add(s.name)
                changed = True
    return any(isinstance(e, ir.Mma) and from_mma(e.a) for e in ir.walk_exprs(kernel.body))


def _align(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def pow2_divisor(n: int) -> int:
    """The largest power of two that divides ``n`` (any, for 0: every alignment holds)."""
    return n & -n if n else 1 << 30
