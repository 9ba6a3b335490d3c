"""benchmarks/bench_attention.py without a GPU: its sweep is the one asked for, its FLOP counts
are those of a forward pass, and every tile shape it can ask for is compiled."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_attention  # noqa: E402


def test_the_sweep_covers_every_dtype_length_head_dim_and_mask():
    points = bench_attention.sweep()
    assert {(p.dtype, p.seq, p.head_dim, p.causal) for p in points} == {
        (dtype, seq, d, causal) for dtype in ("bf16", "f16") for seq in (1024, 4096, 8192)
        for d in (64, 128) for causal in (False, True)}
    assert all((p.batch, p.heads) == (4, 16) for p in points) and len(points) == 24


def test_flops_are_two_products_and_half_of_them_causal():
    full = bench_attention.Point("bf16", 1024, 64, False)
    assert full.flops == 2 * (2 * 4 * 16 * 1024 * 1024 * 64)
    assert bench_attention.Point("bf16", 1024, 64, True).flops == full.flops / 2


def test_every_tile_height_it_offers_is_compiled():
    from buildtile.backend import CompileOptions
    from buildtile.discovery import KernelModule, find_kernels
    from buildtile.plugins import backends

    registry = backends()
    path = ROOT / "example_project/example_kernels/attention.py"
    (src,) = find_kernels(KernelModule("example_kernels.attention", path), registry, ROOT)
    specs = registry["tile"].impl.analyze(src, CompileOptions()).ir
    compiled = {tuple(s.kernel_ir.tile_shapes["out"]) for s in specs}
    assert compiled == {(1, 1, rows, d) for rows in bench_attention.TILE_ROWS for d in bench_attention.HEAD_DIMS}
