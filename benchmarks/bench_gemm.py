"""Tile matmuls on Hopper (sm_90a: wgmma fed by TMA) against torch.matmul (cuBLAS), in TFLOP/s.

Run on an H100/H200 machine (no install needed: the kernels are built here for sm_90a):

    python benchmarks/bench_gemm.py [--source FILE] [--tile 128 256] [--shapes 8192,8192,8192 ...]
                                    [--epilogue-shapes 8192,8192,1024 ...]

``--source`` is a kernel module with ``matmul_bf16`` and ``matmul_f16`` (default:
tests/fixtures/hopper/matmuls.py, K steps of 64; the example project's
example_kernels/tiles.py has the same kernels with K steps of 32). Prints, per
dtype and shape, both rates, their ratio, which entry ran (the TMA entry, or
the sm_80 one when the inputs or device do not allow it) and the host time of one launch
(a row whose host time nears its kernel time is bound by the launch path, not the kernel). Each time is the
median of CUDA-event timings of ``--inner`` back-to-back launches after warm-up;
the output is poisoned before and checked after each timing.

Then the fused epilogues: example_kernels/epilogues.py's ``matmul_bias_gelu_{bf16,f16}`` (built
here for sm_90a too) against torch's unfused chain ``torch.nn.functional.gelu(a @ b + bias)``
(cuBLAS, then the bias add and the gelu as kernels of their own), each row with its ratio and
whether it meets the bar, fused at least as fast as the chain (>= 1.0x), and a last line with the
verdict over every row. The chain's result is checked after its timing as the kernel's is.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from example_modules import compiled_here
from timing import host_us, time_checked_ms, time_ms

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT / "tests" / "fixtures" / "hopper" / "matmuls.py"
DEFAULT_SHAPES = ["8192,8192,8192", "4096,4096,4096", "8192,8192,1024"]
PACKAGE = "bench_gemm_kernels"
EPILOGUE_SOURCE = ROOT / "example_project" / "example_kernels" / "epilogues.py"
EPILOGUE_SHAPES = ["8192,8192,8192", "8192,8192,1024"]
EPILOGUE_PACKAGE = "bench_gemm_epilogues"
#: the bar of the fused rows: at least as fast as torch's unfused chain
EPILOGUE_BAR = 1.0


def build(source: Path, root: Path, package: str = PACKAGE, module: str = "matmuls"):
    """``source`` built for sm_80 and sm_90a into ``root`` and imported (the sm_80 entry: any other GPU)."""
    sys.path.insert(0, str(ROOT))
    return compiled_here(source, root, package, module, ["sm_80", "sm_90a"])


def bench(torch, tile, kernel, dtype, m: int, n: int, k: int, tile_shape: list[int], inner: int,
          persistent: bool = False) -> None:
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    c = torch.empty(m, n, device="cuda", dtype=dtype)
    want = a.float() @ b.float()
    probe = kernel(a, b, tile.partition(c, tile_shape, persistent=persistent))
    entry = "TMA entry" if probe.uses_tma else "sm_80 entry"
    probe.cancel()

    def ours():
        kernel(a, b, tile.partition(c, tile_shape, persistent=persistent)).launch()

    def check(what):
        def close():
            err = ((c.float() - want).abs().max() / want.abs().max()).item()   # NaN (unwritten) fails too
            if not err < 2e-2:
                raise AssertionError(f"{what} differs from the f32 product after timing (max relative error {err:.3g})")
        return close

    mine = time_checked_ms(torch, ours, c, check("buildtile"), inner=inner, repeat=15, warmup=3)
    theirs = time_checked_ms(torch, lambda: torch.matmul(a, b, out=c), c, check("torch.matmul"), inner=inner,
                             repeat=15, warmup=3)
    # a launch whose host work takes longer than the kernel leaves the GPU idle between kernels
    host = host_us(torch, ours, calls=50)
    flops = 2 * m * n * k
    rate_mine, rate_theirs = flops / (mine / 1e3) / 1e12, flops / (theirs / 1e3) / 1e12
    name = str(dtype).removeprefix("torch.")
    print(f"{name:<9} {m:>6} x {n:>6} x {k:>6}  buildtile {rate_mine:7.1f} TFLOP/s ({mine:.3f} ms, {entry}, "
          f"host {host:.0f} us a launch)  torch {rate_theirs:7.1f} TFLOP/s  ratio {rate_mine / rate_theirs:.2f}x",
          flush=True)


def meets_bar(ratio: float) -> bool:
    """Whether a fused row is at least as fast as torch's unfused chain (NaN never is)."""
    return ratio >= EPILOGUE_BAR


def bench_bias_gelu(torch, tile, kernel, dtype, m: int, n: int, k: int, tile_shape: list[int], inner: int,
                    persistent: bool = False) -> float:
    """One fused row: ``kernel`` (gelu(a @ b + bias) in one launch) against torch's unfused chain;
    prints it and returns the ratio of the rates (ours / torch's)."""
    gelu = torch.nn.functional.gelu
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    bias = torch.randn(n, device="cuda", dtype=dtype)
    c = torch.empty(m, n, device="cuda", dtype=dtype)
    want = gelu(a.float() @ b.float() + bias.float())
    probe = kernel(a, b, bias, tile.partition(c, tile_shape, persistent=persistent))
    entry = "TMA entry" if probe.uses_tma else "sm_80 entry"
    probe.cancel()

    def close(what, got):
        err = ((got.float() - want).abs().max() / want.abs().max()).item()   # NaN (unwritten) fails too
        if not err < 2e-2:
            raise AssertionError(f"{what} differs from the f32 result after timing (max relative error {err:.3g})")

    def ours():
        kernel(a, b, bias, tile.partition(c, tile_shape, persistent=persistent)).launch()

    chain = {}

    def theirs():
        chain["c"] = gelu(a @ b + bias)

    mine = time_checked_ms(torch, ours, c, lambda: close("buildtile", c), inner=inner, repeat=15, warmup=3)
    unfused = time_ms(torch, theirs, inner=inner, repeat=15, warmup=3)
    torch.cuda.synchronize()
    close("torch's chain", chain["c"])
    flops = 2 * m * n * k
    rate_mine, rate_theirs = flops / (mine / 1e3) / 1e12, flops / (unfused / 1e3) / 1e12
    ratio = rate_mine / rate_theirs
    name = str(dtype).removeprefix("torch.")
    print(f"{name:<9} {m:>6} x {n:>6} x {k:>6}  bias+gelu fused {rate_mine:7.1f} TFLOP/s ({mine:.3f} ms, {entry})  "
          f"torch unfused {rate_theirs:7.1f} TFLOP/s ({unfused:.3f} ms)  ratio {ratio:.2f}x  "
          f"{'PASS' if meets_bar(ratio) else 'FAIL'}", flush=True)
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="module with matmul_bf16 / matmul_f16")
    parser.add_argument("--tile", type=int, nargs=2, default=[128, 256], help="the specialization to launch")
    parser.add_argument("--shapes", nargs="+", default=DEFAULT_SHAPES, help="M,N,K of each product")
    parser.add_argument("--inner", type=int, default=5, help="launches per timing sample")
    parser.add_argument("--persistent", action="store_true", help="launch a persistent grid (one wave of blocks)")
    parser.add_argument("--epilogue-source", type=Path, default=EPILOGUE_SOURCE,
                        help="module with matmul_bias_gelu_bf16 / matmul_bias_gelu_f16")
    parser.add_argument("--epilogue-shapes", nargs="*", default=EPILOGUE_SHAPES,
                        help="M,N,K of each fused bias+gelu product (none: skip the fused rows)")
    args = parser.parse_args()

    import torch

    from buildtile import tile

    print(f"device: {torch.cuda.get_device_name(0)}; kernels: {args.source}, tile {args.tile}"
          f"{', persistent grid' if args.persistent else ''}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_gemm_") as tmp:
        kernels = build(args.source, Path(tmp))
        for dtype, name in ((torch.bfloat16, "matmul_bf16"), (torch.float16, "matmul_f16")):
            for shape in args.shapes:
                m, n, k = (int(x) for x in shape.split(","))
                bench(torch, tile, getattr(kernels, name), dtype, m, n, k, list(args.tile), args.inner, args.persistent)
        if args.epilogue_shapes:
            print(f"fused epilogues: {args.epilogue_source}, tile {args.tile}", flush=True)
            (Path(tmp) / "epilogues").mkdir()
            epilogues = build(args.epilogue_source, Path(tmp) / "epilogues", EPILOGUE_PACKAGE, "epilogues")
            ratios = []
            for dtype, name in ((torch.bfloat16, "matmul_bias_gelu_bf16"), (torch.float16, "matmul_bias_gelu_f16")):
                for shape in args.epilogue_shapes:
                    m, n, k = (int(x) for x in shape.split(","))
                    ratios.append(bench_bias_gelu(torch, tile, getattr(epilogues, name), dtype, m, n, k,
                                                  list(args.tile), args.inner, args.persistent))
            verdict = "PASS" if all(meets_bar(r) for r in ratios) else "FAIL"
            print(f"{verdict}: fused bias+gelu >= {EPILOGUE_BAR:.1f}x torch's unfused chain "
                  f"(lowest ratio {min(ratios):.2f}x over {len(ratios)} rows)", flush=True)


if __name__ == "__main__":
    main()
