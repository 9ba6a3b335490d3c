"""Register budgets: PTX -> cubin at the highest occupancy that does not spill.

nvJitLink assembles PTX as relocatable device code, and in that mode ptxas
spends registers freely: a row kernel that standalone ptxas fits in 64
registers takes 162 through nvJitLink, which leaves an SM one block of 256
threads (8 warps) where it could hold four, and a memory-bound kernel then
cannot keep enough loads in flight. ``-maxrregcount`` is ignored in that mode;
a ``.maxnreg`` directive on the entry is not.

So each entry whose block size is fixed (``.reqntid``, from the launch
contract or the Tile planner) and that does not choose its own budget
(``.maxnreg``, or ``.minnctapersm`` from a contract's ``min_blocks`` or the
mma planner) is linked once as it is, then, if it takes more registers than
half an SM's worth of threads leaves it, at each budget that would fit one
more block per SM, from the most blocks down; the first budget at which
ptxas reports at most :data:`SPILL_ALLOWANCE` bytes of spill stores is kept,
written into the PTX that ships. An entry that spills more than that as it
is, or fits no smaller budget, stays as ptxas made it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from buildtile.errors import ToolchainError

#: the registers and threads of an sm_80+ multiprocessor, and its shared memory (bytes)
REGISTERS_PER_SM = 65536
THREADS_PER_SM = 2048
SHARED_PER_SM = 228 * 1024
#: budgets below this are never asked for: 64 registers already give an SM 32 warps (half its
#: threads), past which more warps hardly help a memory-bound kernel
MIN_BUDGET = 64
MAX_REGISTERS = 255
#: spill stores a budget may cost (bytes a thread): a few registers kept in L1-resident local
#: memory cost a memory-bound kernel less than the blocks the budget adds; more do not
SPILL_ALLOWANCE = 32
#: the version of this procedure, part of every compile job's cache key
VERSION = "register-fit 2"

_ENTRY = re.compile(r"^\.visible \.entry (\w+)\(", re.M)
_BLOCK = re.compile(r"^\.(reqntid|maxntid) (\d+)(?:, (\d+))?(?:, (\d+))?\s*$", re.M)
_OWN_BUDGET = re.compile(r"^\.(maxnreg|minnctapersm) ", re.M)


@dataclass(frozen=True)
class EntryUsage:
    """What ptxas reported for one entry."""

    registers: int
    spill_stores: int
    shared: int


def entry_blocks(ptx: str) -> dict[str, int]:
    """Threads per block of each entry that has a fixed block size and no register budget of its
    own: the entries :func:`fit_registers` may give one."""
    out = {}
    starts = [(m.start(), m.group(1)) for m in _ENTRY.finditer(ptx)]
    for (start, name), (end, _) in zip(starts, starts[1:] + [(len(ptx), "")]):
        head = ptx[start:ptx.find("{", start, end) if "{" in ptx[start:end] else end]
        block = _BLOCK.search(head)
        if block is None or _OWN_BUDGET.search(head):
            continue
        threads = 1
        for dim in block.groups()[1:]:
            threads *= int(dim or 1)
        out[name] = threads
    return out


def with_budgets(ptx: str, budgets: dict[str, int]) -> str:
    """``ptx`` with ``.maxnreg N`` after the block-size directive of each entry in ``budgets``."""
    for name, budget in budgets.items():
        start = ptx.index(f".entry {name}(")
        block = _BLOCK.search(ptx, start)
        ptx = ptx[:block.end()] + f"\n.maxnreg {budget}" + ptx[block.end():]
    return ptx


def parse_usage(info_log: str) -> dict[str, EntryUsage]:
    """Registers, spill stores and static shared memory of each function in ptxas' verbose log."""
    out: dict[str, EntryUsage] = {}
    current, spills = None, 0
    for line in info_log.splitlines():
        m = re.search(r"Function properties for '?(\w+)'?", line)
        if m:
            current, spills = m.group(1), 0
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes spill stores", line)
        if m:
            spills = int(m.group(1))
        m = re.search(r"[Uu]sed (\d+) registers", line)
        if m:
            shared = re.search(r"(\d+) bytes smem", line)
            previous = out.get(current)
            out[current] = EntryUsage(int(m.group(1)), max(spills, previous.spill_stores if previous else 0),
                                      int(shared.group(1)) if shared else (previous.shared if previous else 0))
    return out


def blocks_per_sm(threads: int, registers: int, shared: int) -> int:
    """Blocks of ``threads`` threads one multiprocessor holds at ``registers`` a thread."""
    by_registers = REGISTERS_PER_SM // (threads * max(8, -(-registers // 8) * 8))
    by_shared = SHARED_PER_SM // (shared + 1024) if shared else 32
    return max(0, min(by_registers, THREADS_PER_SM // threads, by_shared, 32))


def budgets_to_try(threads: int, usage: EntryUsage) -> list[int]:
    """The register budgets that would give an entry more blocks per SM than ``usage`` does,
    most blocks first (each the largest budget that still fits that many blocks)."""
    now = blocks_per_sm(threads, usage.registers, usage.shared)
    out = []
    for blocks in range(min(THREADS_PER_SM // threads, 32), now, -1):
        budget = min(MAX_REGISTERS, REGISTERS_PER_SM // (blocks * threads) // 8 * 8)
        if budget < MIN_BUDGET or budget >= usage.registers:
            continue
        if blocks_per_sm(threads, budget, usage.shared) > now and budget not in out:
            out.append(budget)
    return out


def fit_registers(ptx: str, link: Callable[[str], tuple[bytes, str]]) -> tuple[str, bytes]:
    """The PTX (with the budgets chosen) and its cubin. ``link(ptx)`` returns the cubin and
    ptxas' verbose info log."""
    cubin, log = link(ptx)
    blocks = entry_blocks(ptx)
    usage = parse_usage(log)
    pending = {name: budgets_to_try(threads, usage[name]) for name, threads in blocks.items()
               if name in usage and usage[name].spill_stores <= SPILL_ALLOWANCE}
    pending = {name: tries for name, tries in pending.items() if tries}
    chosen: dict[str, int] = {}
    last = (ptx, cubin)
    while pending:
        trial = {name: tries[0] for name, tries in pending.items()}
        trial_ptx = with_budgets(ptx, {**chosen, **trial})
        try:
            trial_cubin, trial_log = link(trial_ptx)
            last = (trial_ptx, trial_cubin)
        except ToolchainError:
            # ptxas refuses a budget below what one instruction needs (a wgmma's accumulators, say):
            # that budget does not fit; the next, larger, may
            trial_log = ""
        trial_usage = parse_usage(trial_log)
        for name, budget in trial.items():
            usage_now = trial_usage.get(name)
            if usage_now is not None and usage_now.spill_stores <= SPILL_ALLOWANCE:
                chosen[name] = budget
                del pending[name]
            else:
                pending[name] = pending[name][1:]
        pending = {name: tries for name, tries in pending.items() if tries}
    final = with_budgets(ptx, chosen)
    if final == last[0]:
        return last
    return final, (cubin if final == ptx else link(final)[0])
