"""Row kernels (example_kernels.rows) against PyTorch over a sweep of row lengths, in one run.

Run on a GPU machine (after `pip install ./example_project`, or with the kernels compiled
here for this GPU when the installed package lacks them):

    python benchmarks/bench_rows.py [--gib 1] [--compile-budget 90]

For softmax, layernorm, rmsnorm and cross-entropy, in f32 and bf16, at rows of 256 to 65,536
elements (about ``--gib`` GiB per input): buildtile against torch eager and torch.compile
(each compiled shape within a time box; past it, or where compiling fails, "-"), with the
device copy ceiling (``dst.copy_(src)`` of the same bytes) measured in the same run. Prints
one table and the bars as PASS/FAIL lines: every point >= 1.0x torch (eager), median >=
1.2x, >= 85% of the copy ceiling for rows >= 1024. Each output is poisoned before its timing
and checked against torch after it. Buffers are made once a point and reused; a few
repetitions each, so the sweep takes a few minutes.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

from example_modules import example_module
from timing import time_checked_ms, time_ms

OPS = ("softmax", "layernorm", "rmsnorm", "cross_entropy")
DTYPES = {"f32": 4, "bf16": 2}
ROW_LENGTHS = (256, 1024, 4096, 16384, 65536)
#: whole-row tiles by row length and element size, as example_kernels.rows compiles them (rows of
#: 65,536 take the streamed tile: one block a row, walked in chunks)
ROW_TILES = {
    4: {256: (32, 256), 1024: (4, 1024), 4096: (2, 4096), 16384: (1, 16384), 65536: (1, 65536)},
    2: {256: (32, 256), 1024: (4, 1024), 4096: (1, 4096), 16384: (1, 16384), 65536: (1, 65536)},
}
#: rows of a cross-entropy tile by row length (it walks each row in chunks)
LOSS_ROWS = {256: 32, 1024: 8, 4096: 2, 8192: 1}
BARS = {"min": 1.0, "median": 1.2, "copy": 0.85, "copy_from": 1024}


@dataclass(frozen=True)
class Point:
    op: str
    dtype: str
    rows: int
    cols: int
    tile: tuple[int, ...]      # the tile shape of the output partition

    @property
    def elem_bytes(self) -> int:
        return DTYPES[self.dtype]

    @property
    def input_bytes(self) -> int:
        return self.rows * self.cols * self.elem_bytes

    @property
    def moved_bytes(self) -> int:
        """Bytes a kernel must move at least: the input once, the output once (the norms'
        weights and the losses and targets are small beside them)."""
        if self.op == "cross_entropy":
            return self.input_bytes + self.rows * (8 + 4)
        weights = {"layernorm": 2, "rmsnorm": 1}.get(self.op, 0) * self.cols * self.elem_bytes
        return 2 * self.input_bytes + weights


def sweep(gib: float = 1.0, ops=OPS, dtypes=tuple(DTYPES), lengths=ROW_LENGTHS) -> list[Point]:
    points = []
    for op in ops:
        for dtype, eb in ((d, DTYPES[d]) for d in dtypes):
            for cols in lengths:
                rows = int(gib * (1 << 30)) // (cols * eb)
                if op == "cross_entropy":
                    tile = (LOSS_ROWS[min(cols, 8192)],)
                else:
                    tile = ROW_TILES[eb][cols]
                points.append(Point(op, dtype, rows, cols, tile))
    return points


def load_rows_module():
    """example_kernels.rows as installed (not by default: see its pyproject), or compiled here for this GPU."""
    return example_module("rows", "softmax")


@dataclass
class Result:
    point: Point
    ours_ms: float
    eager_ms: float
    compiled_ms: float | None


def measure(torch, tile, rows_mod, p: Point, compile_left: list[float], timing: dict) -> Result:
    F = torch.nn.functional
    dt = {"f32": torch.float32, "bf16": torch.bfloat16}[p.dtype]
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(p.rows, p.cols, device="cuda", generator=g) * 3).to(dt)
    kernel = getattr(rows_mod, p.op)
    if p.op == "cross_entropy":
        target = torch.randint(0, p.cols, (p.rows,), device="cuda", generator=g)
        out = torch.empty(p.rows, device="cuda")
        args = lambda: (x, target, tile.partition(out, list(p.tile)))   # noqa: E731 (a launch takes its partition)
        ref = lambda: F.cross_entropy(x, target, reduction="none")   # noqa: E731
    else:
        out = torch.empty_like(x)
        w = torch.randn(p.cols, device="cuda", generator=g).to(dt)
        b = torch.randn(p.cols, device="cuda", generator=g).to(dt)
        part = lambda: tile.partition(out, list(p.tile))   # noqa: E731 (a launch takes its partition)
        args = {"softmax": lambda: (x, part()), "layernorm": lambda: (x, w, b, 1e-5, part()),
                "rmsnorm": lambda: (x, w, 1e-6, part())}[p.op]
        ref = {"softmax": lambda: torch.softmax(x, 1),
               "layernorm": lambda: F.layer_norm(x, (p.cols,), w, b, 1e-5),
               "rmsnorm": lambda: F.rms_norm(x, (p.cols,), w, 1e-6)}[p.op]
    want = ref().float()
    tol = 1e-4 if p.dtype == "f32" else 3e-2

    def check():
        torch.testing.assert_close(out.float(), want, rtol=tol, atol=tol)
    ours = time_checked_ms(torch, lambda: kernel(*args()).launch(), out, check, **timing)
    eager = time_ms(torch, ref, **timing)
    compiled = None
    if compile_left[0] > 0:
        start = time.perf_counter()
        try:
            fn = torch.compile(ref, dynamic=False)
            fn()
            compiled = time_ms(torch, fn, **timing)
        except Exception as exc:        # torch.compile is optional here: a failure is a "-" in the table
            print(f"  torch.compile failed for {p.op} {p.dtype} {p.rows}x{p.cols}: {type(exc).__name__}")
        compile_left[0] -= time.perf_counter() - start
    return Result(p, ours, eager, compiled)


def copy_ceiling_tbs(torch, nbytes: int, timing: dict) -> float:
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ms = time_ms(torch, lambda: dst.copy_(src), **timing)
    return 2 * nbytes / ms / 1e9


def report(results: list[Result], copy_tbs: float) -> bool:
    print(f"{'op':<14}{'dtype':<6}{'shape':>14}{'buildtile TB/s':>16}{'torch TB/s':>12}"
          f"{'vs eager':>10}{'vs compile':>12}{'% of copy':>11}")
    ratios, failures = [], []
    for r in results:
        p = r.point
        ours = p.moved_bytes / r.ours_ms / 1e9
        eager = p.moved_bytes / r.eager_ms / 1e9
        ratio = r.eager_ms / r.ours_ms
        vs_compile = f"{r.compiled_ms / r.ours_ms:.2f}x" if r.compiled_ms else "-"
        ratios.append(ratio)
        share = ours / copy_tbs
        print(f"{p.op:<14}{p.dtype:<6}{f'{p.rows}x{p.cols}':>14}{ours:>16.2f}{eager:>12.2f}"
              f"{ratio:>9.2f}x{vs_compile:>12}{100 * share:>10.0f}%")
        if ratio < BARS["min"]:
            failures.append(f"{p.op} {p.dtype} {p.cols}: {ratio:.2f}x torch")
        if p.cols >= BARS["copy_from"] and share < BARS["copy"]:
            failures.append(f"{p.op} {p.dtype} {p.cols}: {100 * share:.0f}% of copy")
    median = statistics.median(ratios)
    lines = [("every point >= 1.0x torch", min(ratios) >= BARS["min"]),
             (f"median >= 1.2x torch (median {median:.2f}x)", median >= BARS["median"]),
             (">= 85% of the copy ceiling for rows >= 1024",
              all(r.point.cols < BARS["copy_from"] or r.point.moved_bytes / r.ours_ms / 1e9 >= BARS["copy"] * copy_tbs
                  for r in results))]
    for text, ok in lines:
        print(f"{'PASS' if ok else 'FAIL'} {text}")
    for f in failures:
        print(f"  below a bar: {f}")
    return all(ok for _, ok in lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0, help="size of each input in GiB")
    parser.add_argument("--compile-budget", type=float, default=90.0, help="seconds torch.compile may take in all")
    parser.add_argument("--repeat", type=int, default=5, help="timed samples a variant")
    parser.add_argument("--ops", nargs="+", choices=OPS, default=OPS, help="a subset of the kernels")
    parser.add_argument("--dtypes", nargs="+", choices=tuple(DTYPES), default=tuple(DTYPES), help="a subset of the dtypes")
    parser.add_argument("--cols", nargs="+", type=int, choices=ROW_LENGTHS, default=ROW_LENGTHS,
                        help="a subset of the row lengths")
    args = parser.parse_args()

    import torch

    from buildtile import tile

    rows_mod = load_rows_module()
    # five launches a sample: the first one's host work is not hidden behind an earlier kernel,
    # and at two a sample it alone was ~5% of a 0.5 ms kernel launched from Python
    timing = {"inner": 5, "repeat": args.repeat, "warmup": 2}
    print(f"buildtile row kernels vs PyTorch {torch.__version__} on {torch.cuda.get_device_name()}")
    copy_tbs = copy_ceiling_tbs(torch, int(args.gib * (1 << 30)), timing)
    print(f"copy ceiling: {copy_tbs:.2f} TB/s (dst.copy_(src), {args.gib:g} GiB)")
    compile_left = [args.compile_budget]
    results = [measure(torch, tile, rows_mod, p, compile_left, timing) for p in sweep(args.gib, args.ops, args.dtypes, args.cols)]
    torch.cuda.empty_cache()
    return 0 if report(results, copy_tbs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
