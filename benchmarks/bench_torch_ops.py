"""Host time per launch through the torch custom op against a direct call of the same kernel.

Run on a GPU machine after the example project is installed (it opts in with
``[tool.buildtile.torch] ops = true``)::

    python benchmarks/bench_torch_ops.py [--launches 20000] [--rounds 7] [--burst 500] [--bar 1.2]

Rows, each over f32 slices of 1024 elements on PyTorch tensors:

- ``direct``: ``ops.vecadd[grid](a, b, c)``, the kernel handle's own launch;
- ``torch op``: ``torch.ops.example_kernels.vecadd(grid, a, b, c)``, through
  PyTorch's dispatcher into the same launch path;
- ``torch op, compiled``: a ``torch.compile(fullgraph=True)``d function calling the op
  (Inductor), for what a compiled model pays.

Each number is the host time of one call: the wall time of ``--launches``
calls divided by their number, after warm-up, the best of ``--rounds``
rounds, the rows taking turns. Calls are timed in bursts of ``--burst`` and
the GPU is drained (untimed) between bursts. Every row poisons its output
(NaN) before its timed calls and checks it against ``a + b`` after them.
The op's ratio to the direct call is printed; with ``--bar`` the script
exits non-zero when it is above the bar.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

N = 1024


def host_us(torch, fn: Callable[[], None], launches: int, burst: int) -> float:
    """Microseconds of host time per call of ``fn``, over ``launches`` calls in bursts of ``burst``."""
    total = 0.0
    done = 0
    while done < launches:
        count = min(burst, launches - done)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(count):
            fn()
        total += time.perf_counter() - start
        done += count
    torch.cuda.synchronize()
    return total / launches * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--burst", type=int, default=500)
    parser.add_argument("--bar", type=float, default=None, help="fail when the op's ratio is above this")
    args = parser.parse_args(argv)

    import torch

    from example_kernels import ops

    op = torch.ops.example_kernels.vecadd
    a = torch.rand(N, device="cuda")
    b = torch.rand(N, device="cuda")
    expected = a + b
    grid = ops.vecadd.grid_for(N)
    grid_list = list(grid)

    def added(c):
        op(grid_list, a, b, c)
        return c

    compiled = torch.compile(lambda c: added(c), fullgraph=True)
    outputs = {name: torch.empty(N, device="cuda") for name in ("direct", "torch op", "torch op, compiled")}
    rows: dict[str, Callable[[], None]] = {
        "direct": lambda c=outputs["direct"]: ops.vecadd[grid](a, b, c),
        "torch op": lambda c=outputs["torch op"]: op(grid_list, a, b, c),
        "torch op, compiled": lambda c=outputs["torch op, compiled"]: compiled(c),
    }
    for name, fn in rows.items():   # warm up (compiles the function, binds the launch)
        for _ in range(50):
            fn()
    best = {name: float("inf") for name in rows}
    for _ in range(args.rounds):
        for name, fn in rows.items():
            outputs[name].fill_(float("nan"))
            best[name] = min(best[name], host_us(torch, fn, args.launches, args.burst))
            torch.testing.assert_close(outputs[name], expected)
    print(f"{'row':<22}{'us/launch':>10}{'vs direct':>11}")
    for name, us in best.items():
        print(f"{name:<22}{us:>10.2f}{us / best['direct']:>10.2f}x")
    ratio = best["torch op"] / best["direct"]
    if args.bar is not None and ratio > args.bar:
        print(f"the torch op costs {ratio:.2f}x a direct call, above the bar of {args.bar}x", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
