"""Tile kernels against what a user would pick instead (PyTorch / cuBLAS), in one run.

Run on a GPU machine after `pip install ./example_project`:

    python benchmarks/bench_tile.py [--gib 1] [--rows 16384 --cols 4096] [--mnk 8192]

Prints, each with its ratio to PyTorch (higher is better; the issue's bars
in brackets):

- add, f32: bandwidth of ``tiles.add`` vs ``torch.add(a, b, out=c)``     [>= 0.95x]
- softmax over rows, f32: ``tiles.softmax`` vs ``torch.softmax(x, 1)`` [>= 0.8x]
- matmul, bf16 in, f32 accumulate, bf16 out: ``tiles.matmul_bf16`` vs
  ``torch.matmul`` (cuBLAS), in TFLOP/s                                   [>= 0.4x; goal 0.9x]

Each time is the median of CUDA-event timings of ``--inner`` back-to-back
launches (so host-side launch work overlaps the GPU, as in a real loop),
after warm-up; each row's output is poisoned before its timing and checked after it
(buildtile against PyTorch, PyTorch against the same reference).
"""

from __future__ import annotations

import argparse

from timing import time_checked_ms

#: the matmul specialization measured: 8 warps of 64 x 64 each, one block per SM (see tiles.py)
MATMUL_TILE = [128, 256]


def report(title: str, unit: str, scale: float, ours: tuple[str, float], theirs: tuple[str, float],
           work: float, bar: str) -> None:
    """Print both timings as a rate (``work`` per second / ``scale``, in ``unit``) and their ratio."""
    print(f"\n{title}")
    print(f"{'':<30}{'ms':>10}{unit:>10}")
    for name, ms in (ours, theirs):
        print(f"{name:<30}{ms:>10.3f}{work / (ms / 1e3) / scale:>10.1f}")
    print(f"ratio buildtile / torch: {theirs[1] / ours[1]:.3f}x   (bar {bar})")


def bench_add(torch, tile, tiles, gib: float, inner: int) -> None:
    n = int(gib * (1 << 30)) // 4
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)

    def tile_add():
        tiles.add(a, b, tile.partition(c, [4096])).launch()

    want = a + b

    def check(what):
        return lambda: _assert(torch.equal(c, want), f"{what} differs from a + b after timing")

    ours = time_checked_ms(torch, tile_add, c, check("tiles.add"), inner=inner, repeat=15, warmup=3)
    theirs = time_checked_ms(torch, lambda: torch.add(a, b, out=c), c, check("torch.add"), inner=inner, repeat=15,
                             warmup=3)
    report(f"add, f32, n = {n:,} ({gib:g} GiB per array)", "GB/s", 1e9,
           ("buildtile tiles.add", ours), ("torch a + b", theirs), 3 * n * 4, ">= 0.95x")


def bench_softmax(torch, tile, tiles, rows: int, cols: int, inner: int) -> None:
    x = torch.randn(rows, cols, device="cuda") * 4
    y = torch.empty_like(x)

    def tile_softmax():
        tiles.softmax(x, tile.partition(y, [1, cols])).launch()

    want = torch.softmax(x.double(), 1).float()

    last = [y]        # torch.softmax has no out=: its row checks the result of its last call

    def torch_softmax():
        last[0] = torch.softmax(x, 1)

    ours = time_checked_ms(torch, tile_softmax, y, lambda: torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-6),
                           inner=inner, repeat=15, warmup=3)
    y.fill_(float("nan"))
    theirs = time_checked_ms(torch, torch_softmax, y,
                             lambda: torch.testing.assert_close(last[0], want, rtol=1e-5, atol=1e-6),
                             inner=inner, repeat=15, warmup=3)
    assert last[0] is not y
    report(f"softmax over rows, f32, {rows} x {cols}", "GB/s", 1e9,
           ("buildtile tiles.softmax", ours), ("torch.softmax", theirs), 2 * x.numel() * 4, ">= 0.8x")


def bench_matmul(torch, tile, tiles, m: int, inner: int) -> None:
    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, m, device="cuda", dtype=torch.bfloat16)

    def tile_matmul():
        tiles.matmul_bf16(a, b, tile.partition(c, MATMUL_TILE)).launch()

    want = torch.matmul(a.float(), b.float())

    def check(what):
        def close():
            err = ((c.float() - want).abs().max() / want.abs().max()).item()   # NaN (unwritten) fails too
            _assert(err < 2e-2, f"{what} differs from the f32 product after timing (max relative error {err:.3g})")
        return close

    ours = time_checked_ms(torch, tile_matmul, c, check("tiles.matmul_bf16"), inner=inner, repeat=15, warmup=3)
    theirs = time_checked_ms(torch, lambda: torch.matmul(a, b, out=c), c, check("torch.matmul"), inner=inner,
                             repeat=15, warmup=3)
    report(f"matmul, bf16 in / f32 accumulate / bf16 out, {m} x {m} x {m}", "TFLOP/s", 1e12,
           ("buildtile tiles.matmul_bf16", ours), ("torch.matmul (cuBLAS)", theirs), 2 * m * m * m,
           ">= 0.4x; goal 0.9x")


def _assert(ok: bool, message: str) -> None:
    if not ok:
        raise AssertionError(message)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0, help="size of each add input in GiB")
    parser.add_argument("--rows", type=int, default=16384, help="softmax rows")
    parser.add_argument("--cols", type=int, default=4096, choices=(1024, 4096), help="softmax row length")
    parser.add_argument("--mnk", type=int, default=8192, help="square matmul size")
    parser.add_argument("--inner", type=int, default=10, help="launches per timing")
    args = parser.parse_args()

    import torch
    from example_kernels import tiles

    from buildtile import tile

    print(f"buildtile Tile kernels vs PyTorch {torch.__version__} on {torch.cuda.get_device_name()}")
    bench_add(torch, tile, tiles, args.gib, args.inner)
    bench_softmax(torch, tile, tiles, args.rows, args.cols, args.inner)
    bench_matmul(torch, tile, tiles, args.mnk, max(1, args.inner // 5))


if __name__ == "__main__":
    main()
