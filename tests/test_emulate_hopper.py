"""The CPU emulator's Hopper instructions (buildtile/emulate/hopper.py, hopper.c, tensor_maps.py).

The TMA entries of tests/fixtures/hopper/matmuls.py (wgmma fed by TMA through mbarriers) run
against NumPy at ragged sizes; a codegen mistake -- a descriptor, a swizzle, a byte count, a
parity, a stage refilled too early -- is a wrong result or a BT diagnostic; and small kernels of
hand-written IR pin the semantics of mbarriers, setmaxnreg and named barriers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from buildtile.backend import CompileOptions
from buildtile.backends.tile.hopper import descriptors, pipeline, wgmma
from buildtile.backends.tile.hopper.select import HOPPER_TARGET
from buildtile.discovery import KernelModule, find_kernels
from buildtile.emulate.direct import TileKernel
from buildtile.emulate.hostir import EmulationError, host_ir
from buildtile.emulate.lines import source_lines
from buildtile.emulate.machine import HostKernel
from buildtile.interop.manifest import TensorMapRecord
from buildtile.plugins import backends
from buildtile.runtime.dtypes import bf16_bits, bf16_values

MATMULS = Path(__file__).parent / "fixtures" / "hopper" / "matmuls.py"
IMPL = backends()["tile"].impl


def tma_kernel(name: str, tile_shape: tuple[int, int]) -> TileKernel:
    """The TMA entry of ``name``'s specialization for ``tile_shape``, lowered now (so a patched
    codegen applies)."""
    sources = {s.name: s for s in find_kernels(KernelModule("matmuls", MATMULS), backends(), MATMULS.parent)}
    with source_lines():   # the analysis lowers the entries: with lines, for the diagnostics
        kernel = IMPL.analyze(sources[name], CompileOptions(targets=(HOPPER_TARGET,)))
        (spec,) = [s for s in IMPL.specializations(kernel) if tuple(s.tile_shapes["c"]) == tile_shape]
        run = TileKernel(spec, kernel.params, tma=True, source_file=str(MATMULS))
    assert "emu_wgmma_mma" in run.host.host.runtime_calls   # the TMA entry, not the plain one
    return run


def operands(m: int, n: int, k: int, dtype: str, seed: int = 0):
    """(a, b, a @ b in f32) with a, b as the kernel takes them (bf16 as its bits)."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    if dtype == "bf16":
        a, b = bf16_bits(a), bf16_bits(b)
        return a, b, bf16_values(a) @ bf16_values(b)
    a, b = a.astype(np.float16), b.astype(np.float16)
    return a, b, a.astype(np.float32) @ b.astype(np.float32)


def matmul(run: TileKernel, m: int, n: int, k: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(c as f32, the f32 reference) of one launch."""
    a, b, expected = operands(m, n, k, dtype)
    c = np.zeros((m, n), np.uint16 if dtype == "bf16" else np.float16)
    run(a, b, c)
    return (bf16_values(c) if dtype == "bf16" else c.astype(np.float32)), expected


def close(got: np.ndarray, expected: np.ndarray, dtype: str) -> bool:
    """Within the output's rounding (bf16: 8 bits; f16: 11), relative to the largest result."""
    return bool(np.abs(got - expected).max() <= (2**-7 if dtype == "bf16" else 2**-10) * np.abs(expected).max())


# ragged M, N and K (none a multiple of the tile), K below one step; both swizzle widths of A
# (K steps of 64: 128 bytes; of 32: 64 bytes), one and two warpgroups, N up to 256
@pytest.mark.parametrize("name,tile_shape,dtype,mnk", [
    ("matmul_f16", (64, 64), "f16", (70, 72, 40)),
    ("matmul_bf16", (64, 64), "bf16", (136, 80, 200)),
    ("matmul_bf16", (128, 128), "bf16", (136, 136, 72)),
    ("matmul_bf16_k32", (64, 64), "bf16", (72, 40, 24)),
    ("matmul_f16", (128, 256), "f16", (72, 264, 16)),
])
def test_the_tma_entries_match_numpy_at_ragged_sizes(name, tile_shape, dtype, mnk):
    got, expected = matmul(tma_kernel(name, tile_shape), *mnk, dtype)
    assert close(got, expected, dtype)


def test_a_fused_epilogue_after_the_tma_k_loop():
    run = tma_kernel("matmul_bias_relu_f32", (128, 128))
    a, b, product = operands(130, 136, 88, "f16")
    bias = np.random.default_rng(1).standard_normal(136).astype(np.float32)
    c = np.full((130, 136), np.nan, np.float32)
    run(a, b, bias, c)
    np.testing.assert_allclose(c, np.maximum(product + bias, 0), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- mistakes are caught


def wrong_or_reported(run: TileKernel, m: int, n: int, k: int, dtype: str) -> bool:
    """Whether a launch computes wrong numbers or reads shared memory that no copy wrote (BT0803)
    or outside every shared variable (BT0800)."""
    try:
        got, expected = matmul(run, m, n, k, dtype)
    except EmulationError as error:
        return error.code in ("BT0800", "BT0803")
    return not close(got, expected, dtype)


@pytest.mark.parametrize("mistake", ["b_swizzle", "a_stride", "b_leading"])
def test_a_wrong_descriptor_is_caught(monkeypatch, mistake):
    if mistake == "b_swizzle":   # B read as 64-byte swizzled, though the copy engine wrote 128
        monkeypatch.setattr(descriptors, "b_descriptor_constant",
                            lambda b: descriptors.descriptor_constant(b.panel_bytes, 8 * b.width, 64))
    elif mistake == "a_stride":   # A's 8-row groups taken half as far apart as they are
        monkeypatch.setattr(descriptors, "a_descriptor_constant",
                            lambda a: descriptors.descriptor_constant(16, 4 * a.width, a.width))
    else:                         # B's panels along N taken one 8-row group too close
        monkeypatch.setattr(descriptors, "b_descriptor_constant",
                            lambda b: descriptors.descriptor_constant(b.panel_bytes - 8 * b.width, 8 * b.width,
                                                                      b.width))
    # B of 128 columns: two panels, LBO apart
    assert wrong_or_reported(tma_kernel("matmul_bf16", (128, 128)), 128, 128, 64, "bf16")


def test_a_tensor_map_with_another_swizzle_than_the_descriptors_is_caught():
    run = tma_kernel("matmul_bf16_k32", (64, 64))   # A: boxes of 32 columns (64 bytes), 64-byte swizzled
    (record,) = [m for m in run.maps if m.param == "a"]
    assert record.swizzle == 64
    run.maps = [TensorMapRecord("a", record.box, 128) if m.param == "a" else m for m in run.maps]
    assert wrong_or_reported(run, 64, 64, 64, "bf16")


def test_a_tensor_map_the_driver_would_refuse_is_refused():
    run = tma_kernel("matmul_f16", (64, 64))   # boxes of 64 columns: rows of 128 bytes
    run.maps = [TensorMapRecord(m.param, m.box, 64) for m in run.maps]
    a, b, _ = operands(64, 64, 64, "f16")
    with pytest.raises(EmulationError) as info:
        run(a, b, np.zeros((64, 64), np.float16))
    assert info.value.code == "BT0805" and "wider than its 64-byte swizzle" in str(info.value)


def test_expecting_more_bytes_than_the_copies_bring_is_a_deadlock_not_a_hang(monkeypatch):
    expect = pipeline._expect
    monkeypatch.setattr(pipeline, "_expect", lambda b, bar, nbytes: expect(b, bar, nbytes + 16))
    with pytest.raises(EmulationError) as info:
        matmul(tma_kernel("matmul_f16", (64, 64)), 70, 72, 40, "f16")
    assert info.value.code == "BT0802" and "mbarrier phase that never completes" in str(info.value)
    assert "16 transaction byte(s)" in str(info.value) and "matmuls.py:" in str(info.value)


def test_waiting_on_the_other_parity_reads_a_stage_before_its_copies_land(monkeypatch):
    wait = pipeline._wait
    monkeypatch.setattr(pipeline, "_wait", lambda em, bar, parity: wait(em, bar, em.b.xor(parity, parity.type(1))))
    with pytest.raises(EmulationError) as info:
        matmul(tma_kernel("matmul_f16", (64, 64)), 70, 72, 40, "f16")
    assert info.value.code == "BT0803" and "matmuls.py:" in str(info.value)


def test_refilling_a_stage_that_an_unretired_wgmma_reads_is_reported(monkeypatch):
    wait = wgmma.wait   # emit_mma keeps one group in flight; keep two, so the refilled stage is still read
    monkeypatch.setattr(wgmma, "wait", lambda b, pending, regs: wait(b, 2 if pending == 1 else pending, regs))
    with pytest.raises(EmulationError) as info:
        matmul(tma_kernel("matmul_f16", (64, 64)), 64, 64, 64 * 10, "f16")
    assert info.value.code == "BT0807" and "not yet retired" in str(info.value)


def test_bt0807_a_wgmma_without_its_fence(monkeypatch):
    monkeypatch.setattr(wgmma, "fence", lambda b, regs: regs)
    with pytest.raises(EmulationError) as info:
        matmul(tma_kernel("matmul_f16", (64, 64)), 64, 64, 64, "f16")
    assert info.value.code == "BT0807" and "wgmma.fence" in str(info.value)


# ---------------------------------------------------------------- instruction semantics, from IR

_TID = "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
_WAIT = ('"{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; selp.u32 $0, 1, 0, p; }", '
         '"=r,r,r,~{memory}"')


def launch_ir(body: str, symbol: str, threads: int) -> None:
    """Run the kernel ``symbol`` (one output slice, unused) of the IR ``body`` over one block."""
    kernel = HostKernel(host_ir(_TID + body, symbol), symbol, [{"name": "out", "kind": "slice", "dtype": "f32",
                                                                 "rank": 1}], per_tile=True)
    out = np.zeros(4, np.float32)
    kernel.launch((1, 1, 1), (threads, 1, 1), 0, [out.ctypes.data, out.size])


def mbarrier_ir(count: int, arrivals: int, parity: int) -> str:
    """Thread 0 inits a barrier of ``count`` arrivals; threads below ``arrivals`` arrive on it; every
    thread waits for the phase of ``parity``."""
    return f"""
@"k1tbar__shared_bar" = internal addrspace(3) global [1 x i64] undef, align 8
define ptx_kernel void @"k1tbar"(ptr addrspace(1) %out, i64 %n) {{
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bar = ptrtoint ptr addrspace(3) @"k1tbar__shared_bar" to i32
  %first = icmp eq i32 %tid, 0
  br i1 %first, label %init, label %synced
init:
  call void asm sideeffect "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{{memory}}"(i32 %bar, i32 {count})
  br label %synced
synced:
  call void asm sideeffect "bar.sync 0;", "~{{memory}}"()
  %arrives = icmp ult i32 %tid, {arrivals}
  br i1 %arrives, label %arrive, label %wait
arrive:
  call void asm sideeffect "mbarrier.arrive.shared::cta.b64 _, [$0];", "r,~{{memory}}"(i32 %bar)
  br label %wait
wait:
  %ok = call i32 asm sideeffect {_WAIT}(i32 %bar, i32 {parity})
  %done = icmp ne i32 %ok, 0
  br i1 %done, label %exit, label %wait
exit:
  ret void
}}
"""


def test_a_phase_completes_with_its_expected_arrivals():
    launch_ir(mbarrier_ir(count=2, arrivals=2, parity=0), "k1tbar", 32)


def test_waiting_on_the_wrong_parity_is_the_deadlock_fault():
    """After phase 0 completes the current phase is 1, which nothing completes: a wait for parity 1
    (the right one is 0) never ends."""
    with pytest.raises(EmulationError) as info:
        launch_ir(mbarrier_ir(count=1, arrivals=1, parity=1), "k1tbar", 32)
    assert info.value.code == "BT0802" and "mbarrier phase that never completes" in str(info.value)
    assert "1 arrival(s)" in str(info.value)


def test_a_phase_short_of_arrivals_is_the_deadlock_fault():
    with pytest.raises(EmulationError) as info:
        launch_ir(mbarrier_ir(count=3, arrivals=2, parity=0), "k1tbar", 32)
    assert info.value.code == "BT0802" and "1 arrival(s)" in str(info.value)


def test_an_arrival_in_a_phase_before_any_wait_saw_the_last_one_complete_is_bt0807():
    """With a count of 1 the second arrival is the next phase's, and no wait has yet seen the first
    phase complete (PTX ISA: one must, before an arrival in the next)."""
    with pytest.raises(EmulationError) as info:
        launch_ir(mbarrier_ir(count=1, arrivals=2, parity=1), "k1tbar", 32)   # phase 2 is current: passes
    assert info.value.code == "BT0807" and "previous phase" in str(info.value)


def guarded_ir(symbol: str, limit: int, asm: str) -> str:
    """Threads below ``limit`` run the inline PTX ``asm``."""
    return f"""
define ptx_kernel void @"{symbol}"(ptr addrspace(1) %out, i64 %n) {{
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %in = icmp ult i32 %tid, {limit}
  br i1 %in, label %run, label %exit
run:
  call void asm sideeffect "{asm}", "~{{memory}}"()
  br label %exit
exit:
  ret void
}}
"""


def test_setmaxnreg_by_a_whole_warpgroup_is_a_no_op():
    launch_ir(guarded_ir("k1tmaxnreg", 128, "setmaxnreg.dec.sync.aligned.u32 40;"), "k1tmaxnreg", 256)


@pytest.mark.parametrize("limit,count,says", [(64, 40, "part of a warpgroup"), (128, 20, "24 to 256")])
def test_setmaxnreg_by_part_of_a_warpgroup_or_with_a_bad_count_is_bt0807(limit, count, says):
    with pytest.raises(EmulationError) as info:
        launch_ir(guarded_ir("k1tmaxnreg", limit, f"setmaxnreg.inc.sync.aligned.u32 {count};"), "k1tmaxnreg", 128)
    assert info.value.code == "BT0807" and says in str(info.value)


def test_a_named_barrier_waits_for_its_count_only():
    launch_ir(guarded_ir("k1tnamed", 64, "bar.sync 1, 64;"), "k1tnamed", 128)   # warps 2 and 3 never come


def test_a_named_barrier_short_of_its_count_is_the_deadlock_fault():
    with pytest.raises(EmulationError) as info:
        launch_ir(guarded_ir("k1tnamed", 32, "bar.sync 1, 64;"), "k1tnamed", 128)
    assert info.value.code == "BT0802"


def test_a_named_barrier_count_that_is_no_multiple_of_a_warp_is_bt0807():
    with pytest.raises(EmulationError) as info:
        launch_ir(guarded_ir("k1tnamed", 64, "bar.arrive 1, 48;"), "k1tnamed", 128)
    assert info.value.code == "BT0807" and "multiple of 32" in str(info.value)
