"""What the CPU emulator checks that a GPU cannot: each rule broken by a kernel of
tests/emulate_cases.py (inside ``simt.unsafe()``) is a BT diagnostic naming the kernel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from buildtile.emulate.direct import SimtKernel
from buildtile.emulate.hostir import EmulationError, host_ir
from buildtile.emulate.machine import HostKernel

CASES = Path(__file__).parent / "emulate_cases.py"
N = 128   # two blocks of 64


def line_of(text: str) -> str:
    """``emulate_cases.py:<line>`` of the first line holding ``text``."""
    lines = CASES.read_text().splitlines()
    return f"emulate_cases.py:{next(k for k, line in enumerate(lines, 1) if text in line)}"


def run(name: str, *arrays: np.ndarray) -> None:
    SimtKernel(CASES, name)(N // 64, 64, *arrays)


def inputs():
    return np.arange(N, dtype=np.float32), np.zeros(N, np.float32)


def test_bt0800_a_read_past_the_end_names_the_array_and_the_thread():
    with pytest.raises(EmulationError) as info:
        run("read_past_end", *inputs())
    text = str(info.value)
    assert info.value.code == "BT0800"
    assert "`read_past_end`" in text and "`x`" in text and f"byte {4 * N}" in text
    assert "thread 63 of block 1" in text
    assert line_of("out[i] = x[i + 1]") in text


def test_bt0801_two_threads_writing_one_element_are_reported():
    with pytest.raises(EmulationError) as info:
        run("two_writers", np.zeros(N, np.float32))
    assert info.value.code == "BT0801"
    assert "`two_writers`" in str(info.value) and "`out`" in str(info.value)
    assert line_of("out[i // 2] = 1.0") in str(info.value)


def test_bt0802_a_barrier_after_half_the_block_returned():
    with pytest.raises(EmulationError) as info:
        run("barrier_after_return", *inputs())
    assert info.value.code == "BT0802"
    assert "32 thread(s)" in str(info.value) and "`barrier_after_return`" in str(info.value)
    assert line_of("simt.sync_threads()") in str(info.value)


def test_bt0802_threads_that_wait_for_each_other_forever_are_reported_not_hung():
    with pytest.raises(EmulationError) as info:
        run("waits_for_each_other", *inputs())
    text = str(info.value)
    assert info.value.code == "BT0802" and "wait for each other forever" in text
    assert "`waits_for_each_other`" in text and "thread 0 of block 0" in text


def test_shuffles_meet_over_their_member_mask():
    x, out = inputs()
    run("halves_shuffle_apart", x, out)
    lane = np.arange(N) % 32
    partner_xor = x[np.arange(N) ^ 1]
    down = np.where(lane + 2 < 32, x[np.minimum(np.arange(N) + 2, N - 1)], x)
    np.testing.assert_array_equal(out, np.where(lane < 16, x + partner_xor, x - down))


def test_lanes_outside_a_shuffles_mask_need_not_reach_it():
    x = np.arange(1, N + 1, dtype=np.int32)
    out = np.zeros(N, np.int32)
    run("first_lanes_scan", x, out)
    want = x.reshape(-1, 32).copy()
    want[:, :8] = np.cumsum(want[:, :8], axis=1)
    np.testing.assert_array_equal(out, want.ravel())


def test_bt0803_reading_shared_memory_no_thread_wrote():
    with pytest.raises(EmulationError) as info:
        run("reads_unwritten_shared", *inputs())
    assert info.value.code == "BT0803"
    assert "`stage`" in str(info.value) and line_of("out[i] = stage[t]") in str(info.value)


def test_a_kernel_that_keeps_the_rules_runs_and_matches_numpy():
    x, out = inputs()
    run("well_behaved", x, out)
    np.testing.assert_array_equal(out, x.reshape(-1, 64)[:, ::-1].ravel())


@pytest.mark.parametrize("n", [1, 200, 256])
def test_a_cooperative_launch_waits_for_every_block_and_each_keeps_its_shared_memory(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    total, out = np.zeros(1, np.float32), np.full(256, np.nan, np.float32)
    SimtKernel(CASES, "grid_phases")(4, 64, x, total, out)
    staged = np.zeros(256, np.float32)
    staged[:n] = x
    # after the grid barrier every block reads the whole grid's sum, and its own stage reversed
    expected = staged.reshape(4, 64)[:, ::-1].ravel() + total[0]
    np.testing.assert_allclose(total, [x.astype(np.float64).sum()], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out, expected)


def test_bt0802_a_grid_barrier_that_one_block_never_reaches():
    out = np.zeros(256, np.float32)
    with pytest.raises(EmulationError) as info:
        SimtKernel(CASES, "grid_sync_after_return")(4, 64, out)
    assert info.value.code == "BT0802"
    assert "grid-wide wait no block can end" in str(info.value) and "`grid_sync_after_return`" in str(info.value)


MISALIGNED_IR = """
define ptx_kernel void @"k4case10misaligned"(ptr addrspace(1) %p, i64 %n) {
  %q = getelementptr i8, ptr addrspace(1) %p, i64 4
  %v = load <4 x float>, ptr addrspace(1) %q, align 16
  %w = fadd <4 x float> %v, %v
  store <4 x float> %w, ptr addrspace(1) %q, align 16
  ret void
}
"""


def test_bt0804_a_misaligned_vector_access():
    kernel = HostKernel(host_ir(MISALIGNED_IR, "k4case10misaligned"), "misaligned",
                        [{"name": "x", "kind": "disjoint_slice", "dtype": "f32", "rank": 1}], per_tile=False)
    x = np.zeros(64, np.float32)
    with pytest.raises(EmulationError) as info:
        kernel.launch((1, 1, 1), (1, 1, 1), 0, [x.ctypes.data, x.size])
    assert info.value.code == "BT0804" and "misaligned read of 16 bytes" in str(info.value)


def test_bt0805_inline_ptx_the_emulator_does_not_model():
    ir = ('define ptx_kernel void @"k1m1k"() {\n  call void asm sideeffect "trap;", ""()\n  ret void\n}\n')
    with pytest.raises(EmulationError) as info:
        host_ir(ir, "k1m1k")
    assert info.value.code == "BT0805" and "trap;" in str(info.value)


UNRETIRED_IR = """
declare void @llvm.nvvm.cp.async.cg.shared.global.16.s(ptr addrspace(3), ptr addrspace(1), i32)
declare void @llvm.nvvm.cp.async.commit.group()
@"k4case9unretired__shared_stage" = internal addrspace(3) global [4 x float] undef, align 16

define ptx_kernel void @"k4case9unretired"(ptr addrspace(1) %p, i64 %n) {
  call void @llvm.nvvm.cp.async.cg.shared.global.16.s(ptr addrspace(3) @"k4case9unretired__shared_stage", ptr addrspace(1) %p, i32 16)
  call void @llvm.nvvm.cp.async.commit.group()
  ret void
}
"""


def test_bt0806_copies_left_in_flight():
    kernel = HostKernel(host_ir(UNRETIRED_IR, "k4case9unretired"), "unretired",
                        [{"name": "x", "kind": "slice", "dtype": "f32", "rank": 1}], per_tile=True)
    x = np.zeros(64, np.float32)
    with pytest.raises(EmulationError) as info:
        kernel.launch((1, 1, 1), (32, 1, 1), 0, [x.ctypes.data, x.size])
    assert info.value.code == "BT0806" and "`unretired`" in str(info.value)
