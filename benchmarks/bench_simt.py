"""SIMT kernels against the references a user would pick instead, in one run.

Run on a GPU machine after `pip install ./example_project`:

    python benchmarks/bench_simt.py [--gib 1]

Prints bandwidth (bytes read + written / time) of buildtile's vecadd next to
torch `a + b` and a device-to-device copy (the hardware ceiling), and the
ratio to each; then the sum of an f32 array of that size by sum_total (one kernel) and
sum_partials (partials, then torch) next to torch.sum. Times are medians of
CUDA-event timings after warm-up.
"""

from __future__ import annotations

import argparse

from timing import time_checked_ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0, help="size of each input array in GiB")
    args = parser.parse_args()

    import torch

    from example_kernels import ops

    n = int(args.gib * (1 << 30)) // 4
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    grid = (n + 255) // 256
    launch = ops.vecadd.prepare(grid=grid)

    rows = []
    bytes_3 = 3 * n * 4
    want = a + b

    def equal(x, y, what):
        return lambda: _assert(torch.equal(x, y), f"{what}: wrong result after timing")

    rows.append(("device copy (ceiling)", time_checked_ms(torch, lambda: c.copy_(a), c, equal(c, a, "copy")), 2 * n * 4))
    rows.append(("torch a + b", time_checked_ms(torch, lambda: torch.add(a, b, out=c), c, equal(c, want, "torch add")),
                 bytes_3))
    rows.append(("buildtile vecadd", time_checked_ms(torch, lambda: launch(a, b, c), c, equal(c, want, "vecadd")),
                 bytes_3))
    print(f"vecadd, f32, n = {n:,} ({args.gib:g} GiB per array), {torch.cuda.get_device_name()}")
    print(f"{'':<24}{'ms':>9}{'TB/s':>9}")
    bw = {}
    for name, ms, nbytes in rows:
        bw[name] = nbytes / ms / 1e9
        print(f"{name:<24}{ms:>9.3f}{bw[name]:>9.2f}")
    ours = bw["buildtile vecadd"]
    print(f"ratio vs torch a+b: {ours / bw['torch a + b']:.3f}x   vs copy ceiling: {ours / bw['device copy (ceiling)']:.3f}x")

    # reduction: bytes read once. sum_total is one kernel (its aligned entry, 128-bit loads) that
    # adds each block's share into total with one atomic; sum_partials leaves one partial per block
    # and torch sums those few thousand. The grid fills the GPU: every block resident at once.
    from example_kernels import patterns

    # Small integers as f32: every partial sum is exact (far below 2**24), so the sums must equal the
    # exact total; a tolerance would let skipped elements through.
    ints = torch.randint(-8, 9, (n,), device="cuda", dtype=torch.int32).to(torch.float32)
    exact = int(ints.to(torch.int64).sum().item())
    props = torch.cuda.get_device_properties(0)
    # sum_total's contract (min_blocks) fits this many blocks on each SM, a full SM's threads
    blocks_per_sm = min(patterns.SUM_BLOCKS_PER_SM, props.max_threads_per_multi_processor // patterns.REDUCE_BLOCK)
    grid = props.multi_processor_count * blocks_per_sm
    partial = torch.empty(grid, device="cuda")
    partials_launch = patterns.sum_partials.prepare(grid=grid)
    total_launch = patterns.sum_total.prepare(grid=grid)
    total = torch.empty(1, device="cuda")

    def buildtile_sum_total():
        total.zero_()
        total_launch(ints, total)

    def buildtile_sum_partials():
        partials_launch(ints, partial)
        torch.sum(partial, dim=0, keepdim=True, out=total)

    def torch_sum():
        torch.sum(ints, dim=0, keepdim=True, out=total)

    def sums_to_exact(what):
        return lambda: _assert(total.item() == exact, f"{what}: sum {total.item()} after timing, exact {exact}")

    partial.fill_(float("nan"))   # a sum_partials that never ran leaves a NaN total
    red = [("torch sum", time_checked_ms(torch, torch_sum, total, sums_to_exact("torch sum"))),
           ("buildtile sum_total", time_checked_ms(torch, buildtile_sum_total, total, sums_to_exact("sum_total"))),
           ("buildtile sum_partials",
            time_checked_ms(torch, buildtile_sum_partials, total, sums_to_exact("sum_partials")))]
    aligned = "aligned entry" if ints.data_ptr() % 16 == 0 else "plain entry"
    print(f"\nsum, f32, n = {n:,}; grid {grid} = {props.multi_processor_count} SMs x {blocks_per_sm} blocks "
          f"({aligned})")
    for name, ms in red:
        print(f"{name:<24}{ms:>9.3f}{n * 4 / ms / 1e9:>9.2f}")
    for name, ms in red[1:]:
        print(f"{name}: ratio vs torch sum: {red[0][1] / ms:.3f}x   vs copy ceiling: "
              f"{(n * 4 / ms / 1e9) / bw['device copy (ceiling)']:.3f}x")


def _assert(ok: bool, message: str) -> None:
    if not ok:
        raise AssertionError(message)


if __name__ == "__main__":
    main()
