"""The Tile pipeline without a GPU: every example kernel's specializations -> PTX -> cubin.

Also the promises of the lowering that can be read off the PTX: 128-bit
non-coherent loads and 128-bit stores, warp shuffles for reductions,
tensor-core ``mma.sync`` fed by ``ldmatrix`` and ``cp.async``, the thread
count as ``.reqntid``; and the manifest records the build writes.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from buildtile.backend import CompileOptions
from buildtile.discovery import KernelModule, find_kernels
from buildtile.errors import CompileError
from buildtile.interop.abi import mangle
from buildtile.plugins import backends
from buildtile.toolchain.nvjitlink import ptx_to_cubin
from buildtile.toolchain.ptx import llvm_to_ptx

ROOT = Path(__file__).parent.parent
TILES = ROOT / "example_project" / "example_kernels" / "tiles.py"
CASES = Path(__file__).parent / "tile_cases.py"
ROWS = ROOT / "example_project" / "example_kernels" / "rows.py"
OPTIONS = CompileOptions()
IMPL = backends()["tile"].impl


def analyzed(path: Path, module: str) -> dict:
    return {src.name: IMPL.analyze(src, OPTIONS)
            for src in find_kernels(KernelModule(module, path), backends(), ROOT) if src.kind == "tile"}


KERNELS = analyzed(TILES, "example_kernels.tiles")
CASE_KERNELS = analyzed(CASES, "tile_cases")
SPECS = [(name, s) for name, k in sorted(KERNELS.items()) for s in IMPL.specializations(k)]


@cache
def ptx_of(name: str, symbol: str, target: str = "sm_90") -> str:
    kernel = KERNELS.get(name) or CASE_KERNELS[name]
    (spec,) = [s for s in IMPL.specializations(kernel) if s.symbol == symbol]
    return IMPL.to_ptx(kernel, target, OPTIONS, specialization=spec)


def spec_of(name: str, shape: tuple) -> object:
    return next(s for s in IMPL.specializations(KERNELS[name]) if tuple(next(iter(s.tile_shapes.values()))) == shape)


def test_the_example_module_has_every_kernel_of_the_issue():
    assert set(KERNELS) == {"add", "axpby", "scale_bias", "softmax", "layernorm", "row_sum", "matmul_f16", "matmul_bf16"}


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name,spec", SPECS, ids=[f"{name}__{s.label}" for name, s in SPECS])
def test_example_specialization_links_to_cubin(name, spec, target):
    ptx = ptx_of(name, spec.symbol, target)
    assert f".target {target}" in ptx
    assert f".visible .entry {spec.symbol}(" in ptx
    assert re.search(rf"\.reqntid {spec.block[0]}, 1, 1\b", ptx)
    cubin = ptx_to_cubin(ptx, target)
    assert cubin[:4] == b"\x7fELF" and spec.symbol.encode() in cubin


@pytest.mark.parametrize("name", sorted(["relu_scaled", "half_affine", "index_pattern", "transpose", "flatten",
                                         "add3d", "col_sum", "row_max_to_cols", "smooth", "matmul_registers"]))
def test_feature_kernel_links_to_cubin(name):
    (spec,) = IMPL.specializations(CASE_KERNELS[name])
    assert ptx_to_cubin(ptx_of(name, spec.symbol, "sm_80"), "sm_80")[:4] == b"\x7fELF"


def test_elementwise_tiles_move_16_bytes_per_access_on_the_fast_path():
    ptx = ptx_of("add", spec_of("add", (1024,)).symbol)
    # 1024 f32 over 64 threads: four 16-byte runs per thread, for x and y, read non-coherently
    assert len(re.findall(r"ld\.global\.nc\.v4\.b32", ptx)) == 8
    assert len(re.findall(r"st\.global\.v4\.b32", ptx)) == 4
    # the masked path for ragged tiles: predicated scalar accesses
    assert "@p ld.global.nc.b32" in ptx and "@p st.global.b32" in ptx


@cache
def row_kernel_ptx(name: str, dtype: str, shape: tuple) -> str:
    kernel = analyzed(ROWS, "example_kernels.rows")[name]
    spec = next(s for s in IMPL.specializations(kernel) if tuple(next(iter(s.tile_shapes.values()))) == shape
                and dict(s.spec.dtypes)["T"] == dtype)
    return IMPL.to_ptx(kernel, "sm_90", OPTIONS, specialization=spec)


def fast_load_runs(ptx: str) -> list[str]:
    """The instructions right after each 16-byte load, up to the next address computation or load."""
    return [run.split("add.s64")[0] for run in ptx.split("ld.global.nc.v4.b32")[1:]]


@pytest.mark.parametrize("name,shape", [("softmax", (4, 1024)), ("layernorm", (4, 1024))])
def test_bf16_tiles_round_two_at_a_time_and_widen_by_one_shift(name, shape):
    ptx = row_kernel_ptx(name, "bf16", shape)
    # astype(bf16) and the store round pairs with the hardware conversion, not integer arithmetic
    assert "cvt.rn.bf16x2.f32" in ptx and "setp.nan.f32" not in ptx
    # a 16-byte load of 8 bf16 becomes 8 f32 registers by 4 shifts and 4 masks, no 16-bit moves
    runs = fast_load_runs(ptx)
    assert runs and all(len(re.findall(r"shl\.b32", r)) == 4 and len(re.findall(r"and\.b32\s+%r\d+, %r\d+, -65536", r)) == 4
                        and "cvt.u32.u16" not in r for r in runs[:4])


def test_a_grid_of_one_tile_column_skips_the_tile_decode():
    # rows of one tile each: (linear id, 0) without the decode's run-time divisions, which stay
    # behind a uniform branch on the column count
    ptx = row_kernel_ptx("softmax", "bf16", (4, 1024))
    assert "div." in ptx
    head = ptx[:ptx.index("div.")]
    ones = re.findall(r"setp\.eq\.b(?:32|64)\s+(%p\d+), %rd?\d+, 1;", head)   # 32-bit ids: see schedule.py
    assert any(re.search(rf"@{p} bra\s", head) for p in ones)


def test_row_reductions_use_warp_shuffles_and_shared_memory_across_warps():
    one_warp_row = ptx_of("softmax", spec_of("softmax", (4, 256)).symbol)
    wide_row = ptx_of("softmax", spec_of("softmax", (1, 4096)).symbol)
    assert "shfl.sync.bfly.b32" in one_warp_row and "shfl.sync.bfly.b32" in wide_row
    assert "bar.sync" in wide_row and "st.shared" in wide_row


@pytest.mark.parametrize("name,dtype", [("matmul_f16", "f16"), ("matmul_bf16", "bf16")])
def test_matmul_runs_on_tensor_cores_fed_by_cp_async(name, dtype):
    ptx = ptx_of(name, spec_of(name, (128, 128)).symbol)
    assert re.search(rf"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.{dtype}\.{dtype}\.f32", ptx)
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx
    assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group" in ptx
    assert ".extern .shared .align 16 .b8 __buildtile_tile_smem[]" in ptx
    # a 128 x 128 tile over 8 warps of 32 x 64, K step 32: 2 k-steps x 2 x 8 fragments, in each
    # of the loop's two versions (all cp.async, or with masked copies)
    assert len(re.findall(r"mma\.sync", ptx)) == 2 * 32


def test_matmul_pipeline_stages_set_its_shared_memory():
    big, small = spec_of("matmul_bf16", (128, 128)), spec_of("matmul_bf16", (64, 64))
    # four stages of a 128x32 and a 32x128 bf16 tile; then 64x32 and 32x64
    assert (big.shared_bytes, big.block) == (4 * 2 * 128 * 32 * 2, [256, 1, 1])
    assert (small.shared_bytes, small.block) == (4 * 2 * 64 * 32 * 2, [128, 1, 1])


def test_large_matmul_tile_takes_one_block_per_sm_and_no_call_in_its_hot_loop():
    wide = spec_of("matmul_bf16", (128, 256))
    # 8 warps of 64 x 64: four stages of a 128x32 and a 32x256 bf16 tile
    assert (wide.shared_bytes, wide.block) == (4 * (128 * 32 + 32 * 256) * 2, [256, 1, 1])
    ptx = ptx_of("matmul_bf16", wide.symbol)
    # 128 accumulators a thread: registers for one block per SM, not two
    assert ".minnctapersm 1" in ptx
    assert ".minnctapersm 2" in ptx_of("matmul_bf16", spec_of("matmul_bf16", (128, 128)).symbol)
    # the pipeline is emitted twice, chosen once per block: all cp.async (2 + 4 copies per thread
    # and stage, 3 stages ahead plus 1 per iteration) and the same with the masked copy as the
    # alternative, so only the second version's loop holds a call (3 in its prologue, 1 in its loop)
    assert len(re.findall(r"mma\.sync", ptx)) == 2 * (2 * 4 * 8)
    assert len(re.findall(r"cp\.async\.cg\.shared\.global", ptx)) == 2 * 6 * 4
    assert len(re.findall(r"call\.uni \S*copy_masked_bf16_128x32,", ptx)) == 4


def test_kernels_without_shared_memory_declare_none():
    assert spec_of("add", (1024,)).shared_bytes == 0
    assert spec_of("scale_bias", (64, 64)).shared_bytes == 0


def test_params_follow_abi_v1():
    assert KERNELS["layernorm"].params == [
        {"name": "x", "kind": "tensor", "dtype": "f32", "rank": 2, "role": "in"},
        {"name": "weight", "kind": "tensor", "dtype": "f32", "rank": 1, "role": "in"},
        {"name": "bias", "kind": "tensor", "dtype": "f32", "rank": 1, "role": "in"},
        {"name": "eps", "kind": "scalar", "dtype": "f32", "rank": 0, "role": "in"},
        {"name": "z", "kind": "tile_out", "dtype": "f32", "rank": 2, "role": "out"},
    ]
    ptx = ptx_of("layernorm", spec_of("layernorm", (1, 1024)).symbol)
    symbol = spec_of("layernorm", (1, 1024)).symbol
    # pointer + extents + strides per array, the scalar: 5 + 3 + 3 + 1 + 5, then the tile schedule
    assert len(re.findall(rf"{symbol}_param_\d+[,\n]", ptx)) == 18


def entry_params(llvm_ir: str, symbol: str) -> list[str]:
    """The parameter names of the kernel function ``symbol`` in LLVM IR text."""
    header = re.search(rf'define ptx_kernel void @"{re.escape(symbol)}"\((.*)\)', llvm_ir).group(1)
    return re.findall(r'%"([^"]+)"', header)


def test_the_kernel_function_takes_the_abi_parameters_in_order():
    from buildtile.interop.abi import TILE_SCHEDULE, kernel_params

    kernel = KERNELS["layernorm"]
    spec = spec_of("layernorm", (1, 1024))
    expected = [p.name for p in kernel_params(kernel.params)] + [TILE_SCHEDULE.name]
    assert expected[:3] == ["x.data", "x.shape0", "x.shape1"]
    assert entry_params(spec.lowered.llvm_ir, spec.symbol) == expected


def test_tile_entries_carry_their_manifest_records():
    kernel = KERNELS["add"]
    entries = IMPL.entries(kernel, OPTIONS)
    add = mangle("example_kernels.tiles", "add")
    assert kernel.grid_param == "z"
    f32 = {"dtypes": {"T": "f32"}, "param_dtypes": {"x": "f32", "y": "f32", "z": "f32"}}
    assert [e.specialization for e in entries if e.specialization["dtypes"]["T"] == "f32"] == [
        {"tile_shapes": {"z": [1024]}, "symbol": f"{add}__t1024", "block": [64, 1, 1],
         "shared_bytes": 0, "schedule": True, **f32},
        {"tile_shapes": {"z": [4096]}, "symbol": f"{add}__t4096", "block": [256, 1, 1],
         "shared_bytes": 0, "schedule": True, **f32},
    ]
    bf16 = [e.specialization for e in entries if e.specialization["dtypes"]["T"] == "bf16"]
    assert [s["symbol"] for s in bf16] == [f"{add}__t1024_bf16", f"{add}__t4096_bf16"]
    assert all(s["param_dtypes"] == {"x": "bf16", "y": "bf16", "z": "bf16"} for s in bf16)
    assert [e.label for e in entries] == ["t1024", "t1024_f16", "t1024_bf16", "t4096", "t4096_f16", "t4096_bf16"]
    assert kernel.symbol == f"{add}__t1024"
    assert kernel.contract["block"] is None
    assert kernel.contract["requires"][0]["text"] == "x.shape[0] == z.shape[0]"


def test_mma_kernels_require_ampere():
    kernel = KERNELS["matmul_bf16"]
    assert kernel.contract["min_compute_capability"] == 80
    assert KERNELS["add"].contract["min_compute_capability"] is None
    with pytest.raises(CompileError, match="needs sm_80 or newer") as err:
        IMPL.to_ptx(kernel, "sm_75", OPTIONS)
    assert err.value.code == "BT0600"


def test_every_target_gets_the_same_llvm_ir():
    # the build caches and parallelises by LLVM IR; the target only enters at PTX
    # (so the PTX of each target must be the PTX of that one IR, and lowering it again must give it again)
    kernel = KERNELS["row_sum"]
    again = analyzed(TILES, "example_kernels.tiles")["row_sum"]   # an independent analysis and lowering
    spec = spec_of("row_sum", (64,))
    (twin,) = [s for s in IMPL.specializations(again) if s.symbol == spec.symbol]
    llvm_ir = IMPL.llvm_ir(kernel, OPTIONS, spec)
    assert llvm_ir == IMPL.llvm_ir(again, OPTIONS, twin)
    assert not re.search(r"sm_\d+", llvm_ir)
    for target in ("sm_80", "sm_90"):
        assert IMPL.to_ptx(kernel, target, OPTIONS, specialization=spec) == llvm_to_ptx(llvm_ir, target, OPTIONS.opt_level)
    assert IMPL.llvm_ir(kernel, OPTIONS) == IMPL.llvm_ir(again, OPTIONS, IMPL.specializations(again)[0])


# ---------------------------------------------------------------- fused attention (example_kernels.attention)

ATTENTION = analyzed(ROOT / "example_project" / "example_kernels" / "attention.py",
                     "example_kernels.attention")["attention"]


def attention_spec(rows: int, d: int):
    (spec,) = [s for s in IMPL.specializations(ATTENTION)
               if tuple(s.tile_shapes["out"]) == (1, 1, rows, d) and not s.symbol.endswith("_f16")]
    return spec


def entry_body(ptx: str) -> str:
    """The kernel entry's PTX, without the device functions defined after it."""
    start = ptx.index(".visible .entry")
    end = ptx.find("\n.func", start)
    return ptx[start:end if end >= 0 else None]


@pytest.mark.parametrize("d", [64, 128])
def test_attention_keeps_its_step_in_registers_and_its_operands_in_shared_memory(d):
    spec = attention_spec(128, d)
    plan = spec.plan
    (pipe,) = plan.pipelines.values()
    assert pipe.names == {"kt", "vt"} and set(plan.resident) == {"qt"} and plan.mma_rows_only
    # the stages of keys and values, then the query block; nothing else (no layout moves through memory)
    assert spec.shared_bytes == pipe.stages * pipe.stage_bytes + 128 * d * 2
    body = entry_body(IMPL.to_ptx(ATTENTION, "sm_90", OPTIONS, specialization=spec))
    # operands arrive by cp.async, p goes to the tensor cores from registers: the kernel stores nothing
    assert "st.shared" not in body and "cp.async.cg.shared.global" in body
    # in each of the loop's two versions, 8 warps of 16 rows: scores 8 x (d / 16) mma, output (d / 8) x 4
    assert len(re.findall(r"mma\.sync", body)) == 2 * (8 * d // 16 + d // 8 * 4)
    # q and k^T without .trans (k is read transposed for free), v with it
    assert len(re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared", body)) == 2 * (d // 16 + 4 * d // 16)
    assert len(re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.trans", body)) == 2 * 4 * (d // 16)
    # barriers: around the query block's copy, the pipeline's in each version (a step, its end), the tile loop
    assert len(re.findall(r"bar\.sync", body)) == 2 + 2 * 2 + 1
    # exp2(s * scale - max): one fused multiply-add an element of the 16 x 64 score block a warp
    assert len(re.findall(r"fma\.rn\.f32", body)) >= 2 * 32
