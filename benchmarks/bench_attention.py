"""Fused attention (example_kernels.attention) against PyTorch's flash SDPA, in one run.

Run on a GPU machine (after `pip install ./example_project`, or with the kernel compiled here
for this GPU when the installed package lacks it):

    python benchmarks/bench_attention.py [--heads 16] [--rows 128] [--repeat 10]

For batch 4, 16 heads, sequence lengths 1024, 4096 and 8192, head dims 64 and 128, bf16 and
f16, causal and not: buildtile's forward against
``torch.nn.functional.scaled_dot_product_attention`` restricted to its flash backend, each
timed in the same run on the same inputs (CUDA events, the median after warm-up; see
timing.py). Both run as CUDA graphs of back-to-back calls, so the table compares the kernels'
device time; the host time of one buildtile launch (its argument checks, which at short
sequences take longer than the kernel) is printed beside the table. Prints one table in
TFLOP/s (``4 * batch * heads * seq^2 * head_dim`` a forward, half of it when causal) and the
bar as a PASS/FAIL line: every row >= 0.6x SDPA. Each output is poisoned before its timing and
checked against SDPA's after it.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from example_modules import example_module
from timing import graphed, host_us, time_checked_ms, time_ms

BATCH = 4
SEQ_LENGTHS = (1024, 4096, 8192)
HEAD_DIMS = (64, 128)
DTYPES = ("bf16", "f16")
#: the slowest ratio to SDPA (flash) any row may show
BAR = 0.6
#: query rows a tile of the attention kernel may have (its specialisations)
TILE_ROWS = (128, 64)
#: calls captured in one CUDA graph, a timed sample
GRAPH_CALLS = 4


@dataclass(frozen=True)
class Point:
    dtype: str
    seq: int
    head_dim: int
    causal: bool
    heads: int = 16
    batch: int = BATCH

    @property
    def flops(self) -> float:
        """Two matrix products of seq x seq x head_dim per (batch, head); causal: half of them."""
        total = 4.0 * self.batch * self.heads * self.seq * self.seq * self.head_dim
        return total / 2 if self.causal else total


def sweep(heads: int = 16, dtypes=DTYPES, seqs=SEQ_LENGTHS, head_dims=HEAD_DIMS) -> list[Point]:
    return [Point(dtype, seq, d, causal, heads) for dtype in dtypes for seq in seqs
            for d in head_dims for causal in (False, True)]


def launch_us(torch, tile, module, heads: int) -> float:
    """Host microseconds of one launch (seq 1024, head dim 64, bf16)."""
    q, k, v = (torch.randn(BATCH, heads, 1024, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out = torch.empty_like(q)
    shape = [1, 1, 128, 64]
    return host_us(torch, lambda: module.attention(q, k, v, 0.125, False, tile.partition(out, shape)).launch())


def load_attention_module():
    """example_kernels.attention as installed, or compiled here for this GPU."""
    return example_module("attention", "attention")


@dataclass
class Result:
    point: Point
    ours_ms: float
    sdpa_ms: float
    tile: tuple[int, ...]

    def tflops(self, ms: float) -> float:
        return self.point.flops / ms / 1e9

    @property
    def ratio(self) -> float:
        return self.sdpa_ms / self.ours_ms


def measure(torch, tile, module, p: Point, rows: int | None, timing: dict) -> Result:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    F = torch.nn.functional
    dt = {"bf16": torch.bfloat16, "f16": torch.float16}[p.dtype]
    g = torch.Generator(device="cuda").manual_seed(p.seq + p.head_dim)
    q, k, v = (torch.randn(p.batch, p.heads, p.seq, p.head_dim, device="cuda", generator=g, dtype=dt)
               for _ in range(3))
    scale = 1.0 / math.sqrt(p.head_dim)
    out = torch.empty_like(q)

    def sdpa():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=p.causal, scale=scale)
    want = sdpa().float()
    shape = None if rows is None else [1, 1, rows, p.head_dim]
    pending = module.attention(q, k, v, scale, p.causal, tile.partition(out, shape))
    chosen = pending.tile_shapes["out"]
    pending.cancel()

    def ours():
        module.attention(q, k, v, scale, p.causal, tile.partition(out, shape)).launch()

    def check():
        torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)
    try:
        ours_ms = time_checked_ms(torch, graphed(torch, ours, GRAPH_CALLS), out, check, **timing) / GRAPH_CALLS
    except RuntimeError as exc:     # no graph capture here: plain launches, host time included
        print(f"  graph capture failed ({type(exc).__name__}: {exc}); timing plain launches")
        ours_ms = time_checked_ms(torch, ours, out, check, **timing)
    theirs_ms = time_ms(torch, graphed(torch, sdpa, GRAPH_CALLS), **timing) / GRAPH_CALLS
    return Result(p, ours_ms, theirs_ms, tuple(chosen))


def report(results: list[Result]) -> bool:
    print(f"{'dtype':<6}{'seq':>6}{'d':>5}{'causal':>8}{'tile':>16}{'buildtile TFLOP/s':>19}"
          f"{'SDPA TFLOP/s':>14}{'ratio':>8}")
    failures = []
    for r in results:
        p = r.point
        tile_text = "x".join(map(str, r.tile)) or "auto"
        print(f"{p.dtype:<6}{p.seq:>6}{p.head_dim:>5}{str(p.causal):>8}{tile_text:>16}"
              f"{r.tflops(r.ours_ms):>19.1f}{r.tflops(r.sdpa_ms):>14.1f}{r.ratio:>7.2f}x")
        if r.ratio < BAR:
            failures.append(f"{p.dtype} seq {p.seq} d {p.head_dim} causal {p.causal}: {r.ratio:.2f}x SDPA")
    ok = not failures
    print(f"{'PASS' if ok else 'FAIL'} every row >= {BAR}x SDPA (flash) "
          f"(slowest {min(r.ratio for r in results):.2f}x)")
    for f in failures:
        print(f"  below the bar: {f}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--heads", type=int, default=16, help="attention heads (16 or 32)")
    parser.add_argument("--rows", type=int, choices=TILE_ROWS, default=None,
                        help="query rows a tile (default: the runtime's choice among the compiled ones)")
    parser.add_argument("--repeat", type=int, default=10, help="timed samples a variant")
    parser.add_argument("--seqs", type=int, nargs="+", default=SEQ_LENGTHS, help="sequence lengths (a subset)")
    parser.add_argument("--dims", type=int, nargs="+", default=HEAD_DIMS, help="head dims (a subset)")
    parser.add_argument("--dtypes", nargs="+", default=DTYPES, choices=DTYPES, help="dtypes (a subset)")
    args = parser.parse_args()

    import torch

    from buildtile import tile

    module = load_attention_module()
    timing = {"inner": 2, "repeat": args.repeat, "warmup": 2}
    print(f"buildtile fused attention vs PyTorch {torch.__version__} SDPA (flash) on {torch.cuda.get_device_name()}")
    results = [measure(torch, tile, module, p, args.rows, timing)
               for p in sweep(args.heads, args.dtypes, args.seqs, args.dims)]
    ok = report(results)
    print(f"host time of one buildtile launch: {launch_us(torch, tile, module, args.heads):.1f} us "
          "(outside the graphs timed above)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
