"""benchmarks/bench_gemm.py without a GPU: its fused rows are the ones asked for, their bar is
>= 1.0x torch's unfused chain, and the fused kernels it launches exist with the tile it asks for."""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_gemm  # noqa: E402


def test_the_fused_rows_are_the_square_and_the_short_k_products():
    assert bench_gemm.EPILOGUE_SHAPES == ["8192,8192,8192", "8192,8192,1024"]
    assert bench_gemm.EPILOGUE_SOURCE == ROOT / "example_project/example_kernels/epilogues.py"


def test_the_bar_is_at_least_as_fast_as_the_unfused_chain():
    assert bench_gemm.meets_bar(1.0) and bench_gemm.meets_bar(1.7)
    assert not bench_gemm.meets_bar(0.99) and not bench_gemm.meets_bar(math.nan)


def test_the_fused_kernels_it_launches_take_the_hopper_path_at_its_default_tile():
    from buildtile.backend import CompileOptions
    from buildtile.discovery import KernelModule, find_kernels
    from buildtile.plugins import backends

    registry = backends()
    impl = registry["tile"].impl
    found = {s.name: s for s in find_kernels(KernelModule("example_kernels.epilogues", bench_gemm.EPILOGUE_SOURCE),
                                             registry, ROOT)}
    for name in ("matmul_bias_gelu_bf16", "matmul_bias_gelu_f16"):
        specs = impl.analyze(found[name], CompileOptions()).ir
        (spec,) = [s for s in specs if s.tile_shapes["c"] == [128, 256]]
        assert spec.tma is not None, f"{name} at 128 x 256 would not run the TMA entry on sm_90a"
