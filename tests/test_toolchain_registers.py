"""Register budgets: each fixed-size entry linked at the most blocks per SM that spill (almost) nothing."""

from __future__ import annotations

import pytest

from buildtile.toolchain import registers
from buildtile.toolchain.registers import EntryUsage, budgets_to_try, entry_blocks, fit_registers, parse_usage

# a kernel that keeps 48 floats live across a loop: ptxas gives it registers for all of them
# unless a budget says otherwise
_BODY = "\n".join(f"\tld.global.f32 %f{i}, [%rd1+{4 * i}];" for i in range(48))
_SUM = "\n".join(f"\tadd.f32 %f{48 + i}, %f{47 + i if i else 0}, %f{i};" for i in range(48))
HEAVY = f"""
.version 8.0
.target sm_90
.address_size 64

.visible .entry heavy(
	.param .u64 heavy_param_0
)
.reqntid 256, 1, 1
{{
	.reg .f32 %f<200>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [heavy_param_0];
{_BODY}
{_SUM}
	st.global.f32 [%rd1], %f95;
	ret;
}}

.visible .entry own_budget(
	.param .u64 own_budget_param_0
)
.reqntid 128, 1, 1
.minnctapersm 2
{{
	ret;
}}

.visible .entry any_block(
	.param .u64 any_block_param_0
)
{{
	ret;
}}
"""

LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'heavy' for 'sm_90'
ptxas info    : Function properties for heavy
ptxas         .     8 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 64 registers, used 1 barriers
info    : Function properties for 'heavy':
info    : used 64 registers, used 1 barriers, 8 stack, 2048 bytes smem, 616 bytes cmem[0], 0 bytes lmem
"""


def test_only_entries_of_a_fixed_block_without_a_budget_of_their_own_are_fitted():
    assert entry_blocks(HEAVY) == {"heavy": 256}


def test_the_verbose_log_gives_registers_spills_and_shared_memory():
    assert parse_usage(LOG) == {"heavy": EntryUsage(registers=64, spill_stores=8, shared=2048)}


def test_budgets_are_tried_from_the_most_blocks_per_sm_down():
    # 256 threads at 162 registers: one block an SM; 64 registers would give four, 80 three, 128 two
    assert budgets_to_try(256, EntryUsage(162, 0, 0)) == [64, 80, 128]
    # already at four blocks: nothing to gain
    assert budgets_to_try(256, EntryUsage(64, 0, 0)) == []
    # shared memory allows two blocks, and registers already give two
    assert budgets_to_try(256, EntryUsage(128, 0, 100 * 1024)) == []


def _fake_link(spills_at: dict[int | None, int]):
    """A linker whose ptxas spills ``spills_at[budget]`` bytes at each budget (None: no budget)."""
    calls = []

    def link(ptx):
        budget = None
        for line in ptx.splitlines():
            if line.startswith(".maxnreg"):
                budget = int(line.split()[1])
        calls.append(budget)
        regs = budget or 162
        log = (f"ptxas info    : Function properties for heavy\nptxas         .     0 bytes stack frame, "
               f"{spills_at.get(budget, 0)} bytes spill stores, 0 bytes spill loads\n"
               f"ptxas info    : Used {regs} registers, used 1 barriers\n")
        return f"cubin at {budget}".encode(), log
    return link, calls


def test_the_first_budget_within_the_spill_allowance_is_kept_and_ships_in_the_ptx():
    link, calls = _fake_link({64: 36, 80: 24})
    ptx, cubin = fit_registers(HEAVY, link)
    assert calls == [None, 64, 80]
    assert cubin == b"cubin at 80"
    assert ".reqntid 256, 1, 1\n.maxnreg 80\n" in ptx
    assert ptx.count(".maxnreg") == 1


def test_an_entry_that_spills_at_every_budget_stays_as_ptxas_made_it():
    link, calls = _fake_link({64: 500, 80: 300, 128: 100})
    ptx, cubin = fit_registers(HEAVY, link)
    assert calls == [None, 64, 80, 128]
    assert ptx == HEAVY and cubin == b"cubin at None"


def test_an_entry_that_already_spills_is_left_alone():
    link, calls = _fake_link({None: registers.SPILL_ALLOWANCE + 4})
    assert fit_registers(HEAVY, link) == (HEAVY, b"cubin at None")
    assert calls == [None]


def test_nvjitlink_honours_the_budget():
    """The budget reaches ptxas through nvJitLink (which ignores -maxrregcount for PTX input)."""
    nvjitlink = pytest.importorskip("buildtile.toolchain.nvjitlink")
    try:
        _, log = nvjitlink.link_ptx(registers.with_budgets(HEAVY, {"heavy": 64}), "sm_90", verbose=True)
    except Exception as exc:        # no nvJitLink on this machine
        pytest.skip(f"nvJitLink unavailable: {exc}")
    assert parse_usage(log)["heavy"].registers <= 64


def test_a_budget_ptxas_refuses_is_one_that_does_not_fit():
    """ptxas stops with C7602 when one instruction needs more registers than the budget (a wgmma's
    accumulators): the next budget is tried, and the build goes on."""
    from buildtile.errors import ToolchainError
    link, calls = _fake_link({})

    def refusing(ptx):
        if ".maxnreg 64" in ptx:
            calls.append(64)
            raise ToolchainError("ptxas fatal   : (C7602) Insufficient registers (64) to compile instruction")
        return link(ptx)
    ptx, cubin = fit_registers(HEAVY, refusing)
    assert calls == [None, 64, 80]
    assert cubin == b"cubin at 80" and ".maxnreg 80" in ptx

