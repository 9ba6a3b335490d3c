"""Host time per launch through the torch custom op against a direct call of the same kernel.

Run on a GPU machine after the example project is installed (it opts in with
``[tool.buildtile.torch] ops = true``)::

    python benchmarks/bench_torch_ops.py [--launches 20000] [--rounds 7] [--burst 500] [--bar 1.2]

Rows, over f32 PyTorch tensors of 1024 elements:

- ``direct``: ``ops.vecadd[grid](a, b, c)``, the kernel handle's own launch;
- ``torch op``: ``torch.ops.example_kernels.vecadd(grid, a, b, c)``, the op
  called eagerly (it launches without PyTorch's dispatcher when nothing
  needs the dispatcher);
- ``torch op .default``: the op's overload, always through the dispatcher;
- ``torch op, compiled``: a ``torch.compile(fullgraph=True)``d function calling the op
  (Inductor), for what a compiled model pays;
- the same for the Tile kernel ``add``: ``tiles.add(x, y, tile.partition(z, [1024])).launch()``
  against ``torch.ops.example_kernels.add(x, y, z, z_tile=[1024])``.

Each number is the host time of one call: the wall time of ``--launches``
calls divided by their number, after warm-up, the best of ``--rounds``
rounds, the rows taking turns. Calls are timed in bursts of ``--burst`` and
the GPU is drained (untimed) between bursts. Every row poisons its output
(NaN) before its timed calls and checks it against ``a + b`` after them.
Each op's ratio to its direct call is printed against ``--bar`` (1.2); the
script exits non-zero when one is above it.

``--host-only`` needs no GPU: it builds a small package with the same two
kernels for the CPU emulator, whose launch is replaced by one that does
nothing, and times the same rows over CPU tensors (the median of the rounds,
in CPU time of the process, so that other work on the machine counts less),
read by the launch's generated binder as it reads CUDA tensors. What it
cannot time is the launch itself and the compiled reading of CUDA tensors,
so the figure to follow there is each op's overhead over its direct call,
in microseconds.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

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


def report(times: dict[str, float], pairs: dict[str, str], bar: float | None,
           overheads: dict[str, float] | None = None) -> int:
    """Print ``times`` (us per call) and each op's ratio to its direct call (``pairs``: op row ->
    direct row); 1 when a ratio is above ``bar``. ``overheads``: each row's own figure of its
    overhead over its direct call (else the difference of their times)."""
    direct_of = {row: direct for op, direct in pairs.items() for row in times if row.startswith(op)}
    overheads = overheads or {row: times[row] - times[direct] for row, direct in direct_of.items()}
    print(f"{'row':<28}{'us/launch':>10}{'vs direct':>11}{'overhead us':>13}")
    for name, us in times.items():
        direct = direct_of.get(name)
        if direct is None:
            print(f"{name:<28}{us:>10.2f}")
        else:
            print(f"{name:<28}{us:>10.2f}{us / times[direct]:>10.2f}x{overheads[name]:>13.2f}")
    failed = 0
    for op, direct in pairs.items():
        ratio = times[op] / times[direct]
        verdict = "" if bar is None else (" (at most the bar)" if ratio <= bar else " ABOVE THE BAR")
        print(f"{op}: {ratio:.2f}x {direct}{'' if bar is None else f', bar {bar}x'}{verdict}")
        failed |= bar is not None and ratio > bar
    return int(failed)


# ----------------------------------------------------------------------------- on a GPU


def on_gpu(args) -> int:
    import torch
    from example_kernels import ops, tiles

    from buildtile import tile

    ns = torch.ops.example_kernels
    a = torch.rand(N, device="cuda")
    b = torch.rand(N, device="cuda")
    expected = a + b
    grid = ops.vecadd.grid_for(N)
    grid_list = list(grid)

    def added(c):
        ns.vecadd(grid_list, a, b, c)
        return c

    compiled = torch.compile(lambda c: added(c), fullgraph=True)
    names = ("direct", "torch op", "torch op .default", "torch op, compiled", "tile direct", "tile op")
    outputs = {name: torch.empty(N, device="cuda") for name in names}
    rows: dict[str, Callable[[], None]] = {
        "direct": lambda c=outputs["direct"]: ops.vecadd[grid](a, b, c),
        "torch op": lambda c=outputs["torch op"]: ns.vecadd(grid_list, a, b, c),
        "torch op .default": lambda c=outputs["torch op .default"]: ns.vecadd.default(grid_list, a, b, c),
        "torch op, compiled": lambda c=outputs["torch op, compiled"]: compiled(c),
        "tile direct": lambda z=outputs["tile direct"]: tiles.add(a, b, tile.partition(z, [1024])).launch(),
        "tile op": lambda z=outputs["tile op"]: ns.add(a, b, z, z_tile=[1024]),
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
    print(f"host time per call (us): mean of {args.launches} calls in bursts of {args.burst}, best of "
          f"{args.rounds}; {torch.cuda.get_device_name()}, torch {torch.__version__}")
    return report(best, {"torch op": "direct", "tile op": "tile direct"}, args.bar)


# ----------------------------------------------------------------------------- without a GPU

PACKAGE = "_buildtile_torch_op_bench"
KERNELS = '''
from buildtile import simt, tile
from buildtile.types import DisjointSlice, Slice, Tensor, f32


@simt.kernel(block=256, requires=["len(a) == len(c)", "len(b) == len(c)"])
def vecadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(c):
        c[i] = a[i] + b[i]


@tile.kernel(specialize=tile.product(shape=("n",), n=[1024]),
             requires=["x.shape[0] == z.shape[0]", "y.shape[0] == z.shape[0]"])
def add(x: Tensor[f32, 1], y: Tensor[f32, 1], z: tile.Out[f32, 1]):
    z.store(tile.load_like(x, z) + tile.load_like(y, z))
'''


def build_package(root: Path) -> None:
    """Compile :data:`KERNELS` into the importable package ``PACKAGE`` under ``root``, opted in to torch ops."""
    from buildtile.compiler import compile_project
    from buildtile.config import load_project

    (root / PACKAGE).mkdir()
    (root / PACKAGE / "__init__.py").write_text("")
    (root / PACKAGE / "kernels.py").write_text(KERNELS)
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "{PACKAGE}"\nversion = "0.1.0"\n\n[tool.buildtile]\n'
        f'kernels = ["{PACKAGE}.kernels"]\ntargets = ["sm_90"]\nptx = false\n\n'
        "[tool.buildtile.torch]\nops = true\n")
    compile_project(load_project(root, env={}), root, log=lambda line: None)


def cpu_tensor_reader():
    """An inline reader of CPU tensors as the emulated device's memory (device 0): the binder reads
    them as it reads CUDA tensors, not through views, as the emulator itself does."""
    from buildtile.runtime.arrays import TORCH_READER, TorchTensorReader

    class CpuTensorReader(TorchTensorReader):
        def _head(self, k, dtype, namespace):
            head = super()._head(k, dtype, namespace)
            return None if head is None else head.replace(f"a{k}.is_cuda", f"a{k}.is_cpu")

        def slice_code(self, k, dtype, namespace):
            lines = super().slice_code(k, dtype, namespace)
            return None if lines is None else [line.replace(f"a{k}.get_device()", "0") for line in lines]

        def tensor_code(self, k, dtype, rank, namespace):
            lines = super().tensor_code(k, dtype, rank, namespace)
            return None if lines is None else [line.replace(f"a{k}.get_device()", "0") for line in lines]

        def batch_code(self, params, cls, namespace, shortcut):
            return None   # the compiled readers read CUDA tensors only

    return CpuTensorReader(TORCH_READER.dtype_object)


def host_only(args) -> int:
    import torch

    from buildtile import tile
    from buildtile.emulate import emulated
    from buildtile.emulate.driver import EmulatedDriver
    from buildtile.runtime.arrays import register_inline_reader
    from buildtile.runtime.driver import set_driver

    class NoLaunchDriver(EmulatedDriver):
        """The emulator's device, whose launches only count."""

        launched = 0

        def get_function(self, module, symbol: str):
            return symbol   # nothing to run

        def launch(self, ctx, function, config, stream, packed: bytes, offsets) -> None:
            self.launched += 1

    # emulated() gives back the driver and the readers of tensors it found
    with emulated(), tempfile.TemporaryDirectory(prefix="bt_bench_torch_ops_") as tmp:
        driver = NoLaunchDriver()
        set_driver(driver)
        register_inline_reader(torch.Tensor, cpu_tensor_reader())
        build_package(Path(tmp))
        sys.path.insert(0, tmp)
        try:
            kernels = importlib.import_module(f"{PACKAGE}.kernels")
        finally:
            sys.path.remove(tmp)
        ns = getattr(torch.ops, PACKAGE)
        a, b, c = torch.rand(N), torch.rand(N), torch.empty(N)
        grid = kernels.vecadd.grid_for(N)
        grid_list = list(grid)
        rows: dict[str, Callable[[], None]] = {
            "direct": lambda: kernels.vecadd[grid](a, b, c),
            "torch op": lambda: ns.vecadd(grid_list, a, b, c),
            "torch op .default": lambda: ns.vecadd.default(grid_list, a, b, c),
            "tile direct": lambda: kernels.add(a, b, tile.partition(c, [1024])).launch(),
            "tile op": lambda: ns.add(a, b, c, z_tile=[1024]),
        }
        samples = cpu_time_samples(rows, driver, args.launches, args.rounds)
    print(f"host CPU time per call (us) without a GPU (a launch that does nothing, CPU tensors): median "
          f"of {args.rounds} rounds of {args.launches} calls; torch {torch.__version__}")
    pairs = {"torch op": "direct", "torch op .default": "direct", "tile op": "tile direct"}
    # each round's overhead is the difference of calls timed next to each other, so a slow
    # spell of the machine counts in both
    overheads = {op: statistics.median(o - d for o, d in zip(samples[op], samples[direct]))
                 for op, direct in pairs.items()}
    return report({name: statistics.median(s) for name, s in samples.items()},
                  {"torch op": "direct", "tile op": "tile direct"}, None, overheads)


def cpu_time_samples(rows: dict[str, Callable[[], None]], driver, launches: int, rounds: int) -> dict[str, list[float]]:
    """Per row, the CPU time of one call (us) in each of ``rounds`` rounds of ``launches`` calls,
    after warm-up; each round checks that ``driver`` received every launch."""
    samples: dict[str, list[float]] = {name: [] for name in rows}
    for fn in rows.values():   # warm up (binds the launches)
        for _ in range(min(launches, 1000)):
            fn()
    for round_ in range(rounds):   # each op row next to its direct row, in turn before and after
        for name in list(rows) if round_ % 2 == 0 else list(rows)[::-1]:
            fn = rows[name]
            driver.launched = 0
            start = time.process_time()
            for _ in range(launches):
                fn()
            samples[name].append((time.process_time() - start) / launches * 1e6)
            if driver.launched != launches:
                raise AssertionError(f"{name}: {driver.launched} launches, not {launches}")
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--burst", type=int, default=500)
    parser.add_argument("--bar", type=float, default=1.2,
                        help="fail when an op's ratio to its direct call is above this")
    parser.add_argument("--host-only", action="store_true",
                        help="no GPU: time the host work with a launch that does nothing")
    args = parser.parse_args(argv)
    return host_only(args) if args.host_only else on_gpu(args)


if __name__ == "__main__":
    sys.exit(main())
