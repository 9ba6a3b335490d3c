"""Tile matmuls on Hopper (sm_90a: wgmma fed by TMA) against torch.matmul (cuBLAS), in TFLOP/s.

Run on an H100/H200 machine (no install needed: the kernels are built here for sm_90a):

    python benchmarks/bench_gemm.py [--source FILE] [--tile 128 256] [--shapes 8192,8192,8192 ...]

``--source`` is a kernel module with ``matmul_bf16`` and ``matmul_f16`` (default:
tests/fixtures/hopper/matmuls.py, K steps of 64; the example project's
example_kernels/tiles.py has the same kernels with K steps of 32). Prints, per
dtype and shape, both rates, their ratio and which entry ran (the TMA entry, or
the sm_80 one when the inputs or device do not allow it). Each time is the
median of CUDA-event timings of ``--inner`` back-to-back launches after warm-up;
the output is poisoned before and checked after each timing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from example_modules import compiled_here
from timing import time_checked_ms

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT / "tests" / "fixtures" / "hopper" / "matmuls.py"
DEFAULT_SHAPES = ["8192,8192,8192", "4096,4096,4096", "8192,8192,1024"]
PACKAGE = "bench_gemm_kernels"


def build(source: Path, root: Path):
    """``source`` built for sm_80 and sm_90a into ``root`` and imported (the sm_80 entry: any other GPU)."""
    sys.path.insert(0, str(ROOT))
    return compiled_here(source, root, PACKAGE, "matmuls", ["sm_80", "sm_90a"])


def bench(torch, tile, kernel, dtype, m: int, n: int, k: int, tile_shape: list[int], inner: int) -> None:
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    c = torch.empty(m, n, device="cuda", dtype=dtype)
    want = a.float() @ b.float()
    probe = kernel(a, b, tile.partition(c, tile_shape))
    entry = "TMA entry" if probe.uses_tma else "sm_80 entry"
    probe.cancel()

    def ours():
        kernel(a, b, tile.partition(c, tile_shape)).launch()

    def check(what):
        def close():
            err = ((c.float() - want).abs().max() / want.abs().max()).item()   # NaN (unwritten) fails too
            if not err < 2e-2:
                raise AssertionError(f"{what} differs from the f32 product after timing (max relative error {err:.3g})")
        return close

    mine = time_checked_ms(torch, ours, c, check("buildtile"), inner=inner, repeat=15, warmup=3)
    theirs = time_checked_ms(torch, lambda: torch.matmul(a, b, out=c), c, check("torch.matmul"), inner=inner,
                             repeat=15, warmup=3)
    flops = 2 * m * n * k
    rate_mine, rate_theirs = flops / (mine / 1e3) / 1e12, flops / (theirs / 1e3) / 1e12
    name = str(dtype).removeprefix("torch.")
    print(f"{name:<9} {m:>6} x {n:>6} x {k:>6}  buildtile {rate_mine:7.1f} TFLOP/s ({mine:.3f} ms, {entry})  "
          f"torch {rate_theirs:7.1f} TFLOP/s  ratio {rate_mine / rate_theirs:.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="module with matmul_bf16 / matmul_f16")
    parser.add_argument("--tile", type=int, nargs=2, default=[128, 256], help="the specialization to launch")
    parser.add_argument("--shapes", nargs="+", default=DEFAULT_SHAPES, help="M,N,K of each product")
    parser.add_argument("--inner", type=int, default=5, help="launches per timing sample")
    args = parser.parse_args()

    import torch

    from buildtile import tile

    print(f"device: {torch.cuda.get_device_name(0)}; kernels: {args.source}, tile {args.tile}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_gemm_") as tmp:
        kernels = build(args.source, Path(tmp))
        for dtype, name in ((torch.bfloat16, "matmul_bf16"), (torch.float16, "matmul_f16")):
            for shape in args.shapes:
                m, n, k = (int(x) for x in shape.split(","))
                bench(torch, tile, getattr(kernels, name), dtype, m, n, k, list(args.tile), args.inner)


if __name__ == "__main__":
    main()
