"""The Hopper lowering of ``tile.mma`` (backends/tile/hopper): which kernels take it, the layouts it
assumes (shared-memory panels, descriptors, wgmma's accumulators) against the PTX ISA's formulas,
and the PTX of an sm_90a matmul, which nvJitLink links to a cubin."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from buildtile.backend import CompileOptions
from buildtile.backends.tile.backend import TMA_SUFFIX
from buildtile.backends.tile.hopper import descriptors as desc
from buildtile.backends.tile.hopper.select import HOPPER_TARGET, wgmma_accumulator
from buildtile.backends.tile.plan import make_plan
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends
from buildtile.toolchain.nvjitlink import ptx_to_cubin
from buildtile.toolchain.ptx import llvm_to_ptx

IMPL = backends()["tile"].impl
HOPPER = CompileOptions(targets=("sm_80", HOPPER_TARGET))

MATMUL = """
from buildtile import tile
from buildtile.types import Tensor, bf16, f16, f32

@tile.kernel(specialize=[{{"c": [{m}, {n}]}}])
def mm(a: Tensor[{t}, 2], b: Tensor[{t}, 2], c: tile.Out[{t}, 2]):
    i, j = c.tile_id(0), c.tile_id(1)
    acc = tile.zeros(({m}, {n}), f32)
    for k in tile.range(tile.cdiv(a.shape[1], {k})):
        ta = tile.load(a, (i, k), ({m}, {k}))
        tb = tile.load(b, (k, j), ({k}, {n}))
        acc = {update}
    c.store(acc.astype({t}))
"""


def analyzed(tmp: Path, m=128, n=256, k=64, t="bf16", update="tile.mma(ta, tb, acc)", options=HOPPER):
    path = tmp / "kernels.py"
    path.write_text(textwrap.dedent(MATMUL.format(m=m, n=n, k=k, t=t, update=update)))
    (src,) = find_kernels(KernelModule("kernels", path), backends(), tmp)
    return IMPL.analyze(src, options)


def tma_entry(tmp: Path, **shape):
    kernel = analyzed(tmp, **shape)
    entries = IMPL.entries(kernel, HOPPER)
    return kernel, {e.symbol: e for e in entries}


# ---------------------------------------------------------------- the planner's choice


@pytest.mark.parametrize("m,n,k,warpgroups,stages", [(128, 256, 64, 2, 3), (128, 128, 32, 2, 8), (64, 64, 64, 1, 8),
                                                      (256, 128, 16, 2, 8), (64, 16, 16, 1, 8)])
def test_a_plain_matmul_loop_takes_the_hopper_path_for_sm_90a_only(tmp_path, m, n, k, warpgroups, stages):
    kernel = analyzed(tmp_path, m=m, n=n, k=k)
    (spec,) = kernel.ir
    assert spec.plan.hopper is None and make_plan(spec.kernel_ir, "sm_90").hopper is None
    plan = spec.tma.plan
    assert (plan.hopper.warpgroups, plan.hopper.stages, plan.threads) == (warpgroups, stages, 128 * warpgroups)
    assert plan.var_layouts["acc"] == wgmma_accumulator(m, n, warpgroups)
    assert plan.hopper.maps() == [
        {"param": "a", "box": [min(k, 64), m], "swizzle": min(128, 2 * k)},
        {"param": "b", "box": [min(n, 64), k], "swizzle": min(128, 2 * n)},
    ]
    assert spec.plan.var_layouts["acc"] != plan.var_layouts["acc"]   # the sm_80 entry keeps its own plan


@pytest.mark.parametrize("shape,update", [
    ({"m": 32, "n": 64, "k": 32}, "tile.mma(ta, tb, acc)"),          # M under one wgmma's 64 rows
    ({"m": 512, "n": 16, "k": 16}, "tile.mma(ta, tb, acc)"),         # 512 rows: past the copy engine's box
    ({"m": 128, "n": 128, "k": 32}, "tile.mma(ta, tb, acc) * 0.5"),  # the accumulator changes outside the mma
    ({"m": 128, "n": 128, "k": 32}, "tile.mma(ta, tb, acc + 1.0)"),  # nor inside it
])
def test_other_loops_keep_the_sm_80_lowering(tmp_path, shape, update):
    kernel = analyzed(tmp_path, update=update, **shape)
    (spec,) = kernel.ir
    assert spec.tma is None
    assert [e.symbol for e in IMPL.entries(kernel, HOPPER)] == [spec.symbol]


def test_the_tma_entry_is_built_for_sm_90a_alone_and_only_when_the_project_targets_it(tmp_path):
    kernel = analyzed(tmp_path)
    plain, tma = IMPL.entries(kernel, HOPPER)
    assert tma.symbol == plain.symbol + TMA_SUFFIX and tma.tma_of == plain.symbol
    assert tma.targets == (HOPPER_TARGET,) and plain.targets == ()
    assert tma.specialization == {"block": [256, 1, 1], "shared_bytes": kernel.ir[0].tma.lowered.shared_bytes,
                                  "maps": kernel.ir[0].tma.plan.hopper.maps()}
    assert len(IMPL.entries(kernel, CompileOptions(targets=("sm_80", "sm_90")))) == 1


# ---------------------------------------------------------------- layouts against the PTX ISA


def _swizzled(offset: int, width: int) -> int:
    """CUTLASS's Swizzle<log2(width / 16), 4, 3> on a byte offset: TMA's and wgmma's pattern."""
    bits = {32: 1, 64: 2, 128: 3}[width]
    return offset ^ (((offset >> 7) & ((1 << bits) - 1)) << 4)


@pytest.mark.parametrize("rows,cols", [(64, 16), (128, 32), (64, 64), (32, 256)])
def test_panels_place_elements_as_the_swizzle_of_their_unswizzled_address(rows, cols):
    panels = desc.Panels(rows, cols)
    seen = set()
    for r in range(rows):
        for c in range(cols):
            panel, inner = divmod(c, panels.panel_cols)
            plain = r * panels.width + inner * 2
            assert panels.element_offset(r, c) == panel * panels.panel_bytes + _swizzled(plain, panels.width)
            seen.add(panels.element_offset(r, c))
    assert len(seen) == rows * cols and panels.nbytes % desc.PANEL_ALIGN == 0


def test_descriptors_hold_the_strides_of_the_canonical_layouts():
    def fields(word):
        return word & 0x3FFF, word >> 16 & 0x3FFF, word >> 32 & 0x3FFF, word >> 62
    a, b = desc.Panels(128, 64), desc.Panels(64, 256)
    assert fields(desc.a_descriptor_constant(a)) == (0, 1, 1024 >> 4, 1)          # K-major, 128-byte swizzle
    assert fields(desc.b_descriptor_constant(b)) == (0, 64 * 128 >> 4, 1024 >> 4, 1)   # MN-major: LBO = a panel
    assert fields(desc.a_descriptor_constant(desc.Panels(64, 32))) == (0, 1, 512 >> 4, 2)
    assert fields(desc.b_descriptor_constant(desc.Panels(16, 16))) == (0, 16 * 32 >> 4, 256 >> 4, 3)
    assert desc.a_offset(a, 1, 3) == 64 * 128 + 3 * 32 and desc.a_offset(desc.Panels(64, 128), 0, 5) == 64 * 128 + 32
    assert desc.b_offset(b, 2) == 2 * 16 * 128


@pytest.mark.parametrize("m,n,groups", [(64, 64, 1), (128, 256, 2), (256, 128, 2), (64, 16, 1)])
def test_the_accumulator_layout_is_wgmmas_fragment_layout(m, n, groups):
    layout = wgmma_accumulator(m, n, groups)
    blocks = m // (64 * groups)
    for t in range(128 * groups):
        group, warp, lane = t // 128, t // 32 % 4, t % 32
        for r in range(layout.nregs):
            block, d = divmod(r, n // 2)
            row = 64 * (group * blocks + block) + 16 * warp + lane // 4 + 8 * (d >> 1 & 1)
            col = 8 * (d >> 2) + 2 * (lane % 4) + (d & 1)
            got = tuple(x + y for x, y in zip(layout.thread_coords(t), layout.reg_coords(r)))
            assert got == (row, col), (t, r)


# ---------------------------------------------------------------- PTX


@pytest.fixture(scope="module")
def hopper_ptx(tmp_path_factory) -> dict[str, str]:
    _, entries = tma_entry(tmp_path_factory.mktemp("hopper"), t="f16")
    return {symbol: llvm_to_ptx(e.llvm_ir, HOPPER_TARGET) for symbol, e in entries.items()}


def test_the_tma_entry_is_wgmma_fed_by_tma_through_mbarriers(hopper_ptx):
    plain, tma = hopper_ptx.values()
    assert "wgmma" not in plain and "cp.async.bulk" not in plain and "mma.sync" in plain
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n256k16\.f32\.f16\.f16 \{(%r\d+, ){127}%r\d+\}, "
                     r"%rd\d+, %rd\d+, p, 1, 1, 0, 1;", tma)
    assert len(re.findall(r"wgmma\.mma_async", tma)) == 64 // 16     # one per 16 of K, per warpgroup's row block
    for instruction in ("wgmma.fence.sync.aligned;", "wgmma.commit_group.sync.aligned;",
                        "wgmma.wait_group.sync.aligned 1;", "wgmma.wait_group.sync.aligned 0;",
                        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
                        "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.arrive.expect_tx.shared::cta.b64",
                        "mbarrier.init.shared::cta.b64", "fence.mbarrier_init.release.cluster;"):
        assert instruction in tma, instruction
    assert "mma.sync" not in tma and "ldmatrix" not in tma
    # the tensor maps: 128 bytes by value, read where they are (no local copy)
    assert len(re.findall(r"\.param \.align 64 \.b8 \w+_param_\d+\[128\]", tma)) == 2
    assert tma.count("cvta.param.u64") == 2 and "local" not in tma


def test_the_tma_entry_keeps_the_registers_its_accumulators_need(hopper_ptx):
    """It says how many blocks it wants, so no register budget is fitted to it (ptxas refuses
    a wgmma under a budget smaller than its accumulators)."""
    from buildtile.toolchain.registers import entry_blocks
    plain, tma = hopper_ptx.values()
    assert ".minnctapersm 1" in tma
    assert entry_blocks(tma) == {} and ".maxnreg" not in tma


def test_the_tma_entry_links_to_an_sm_90a_cubin(hopper_ptx):
    for ptx in hopper_ptx.values():
        assert ptx_to_cubin(ptx, HOPPER_TARGET)[:4] == b"\x7fELF"


def test_the_tma_entry_decodes_its_tiles_without_a_64_bit_division(hopper_ptx):
    """A 64-bit division by a run-time value is a call, and a call makes ptxas serialise the
    wgmmas (C7509): the tile decode is 32-bit, so nvJitLink links the entry without that report."""
    from buildtile.toolchain import nvjitlink
    from buildtile.toolchain.perf_warnings import check_log

    _, tma = hopper_ptx.values()
    assert not re.search(r"\b(div|rem)\.u64\b", tma)
    _, log = nvjitlink._nvjitlink_link(tma, HOPPER_TARGET, name="tma", opt_level=3, verbose=False)
    check_log(log, kernel="tma", target=HOPPER_TARGET, assembler="nvJitLink")    # raises on a report
    assert "C7509" not in log
