"""A quick check of the Hopper matmul path on a GPU, without pytest.

    python tests/gpu/hopper_smoke.py                 # build for sm_90a here, run, time
    python tests/gpu/hopper_smoke.py --build DIR     # only build the package into DIR (no GPU needed)
    python tests/gpu/hopper_smoke.py --prebuilt DIR  # run a package built with --build

Builds tests/fixtures/hopper/matmuls.py for sm_90a into a throwaway package,
runs each kernel at ragged shapes against torch (f32 products of the same
inputs), says for each launch whether it took the TMA entry (wgmma fed by TMA)
or the plain one, checks that a misaligned input falls back and still agrees,
and times the 128 x 256 bf16 kernel at 8192^3 against torch.matmul. Every line
is printed as it happens, so a hang shows where it is; the exit status is 1
when any check failed.
"""

from __future__ import annotations

import argparse
import importlib
import math
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve()
FIXTURE = HERE.parents[1] / "fixtures" / "hopper" / "matmuls.py"
PACKAGE = "hopper_smoke_kernels"
#: relative error the bf16/f16 results may have against the f32 product (one rounding of the output)
TOLERANCE = {"bf16": 2e-2, "f16": 4e-3, "f32": 1e-4}
#: (M, N, K): ragged against every tile; rows of a multiple of 8 elements (16 bytes) take TMA
RAGGED = [(100, 200, 56), (257, 136, 1000), (64, 64, 16), (1000, 1000, 8), (129, 328, 72), (77, 130, 50)]


def say(*parts) -> None:
    print(*parts, flush=True)


def build(root: Path) -> None:
    """The fixture compiled for sm_90a into ``root`` (no GPU needed)."""
    sys.path.insert(0, str(HERE.parents[2]))
    from buildtile.compiler import compile_project
    from buildtile.config import load_project

    (root / PACKAGE).mkdir(parents=True, exist_ok=True)
    (root / PACKAGE / "__init__.py").write_text("")
    shutil.copy(FIXTURE, root / PACKAGE / "matmuls.py")
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "{PACKAGE}"\nversion = "0.1.0"\n\n[tool.buildtile]\n'
        f'kernels = ["{PACKAGE}.matmuls"]\ntargets = ["sm_90a"]\nptx = false\ncache-dir = "off"\n')
    started = time.perf_counter()
    manifest = compile_project(load_project(root, env={}), root, log=lambda line: None)
    tma = sum(1 for k in manifest["kernels"] for s in k["tile"]["specializations"] if "tma" in s)
    say(f"built {PACKAGE} for sm_90a in {time.perf_counter() - started:.1f} s: {tma} specializations have a TMA entry")


def run(root: Path) -> int:
    import torch

    from buildtile import tile

    sys.path.insert(0, str(root))
    mm = importlib.import_module(f"{PACKAGE}.matmuls")
    say(f"device: {torch.cuda.get_device_name(0)}, capability {torch.cuda.get_device_capability(0)}")
    failures = 0

    def launch(kernel, args, out, shape):
        pending = kernel(*args, tile.partition(out, shape))
        tma = pending.uses_tma
        pending.launch()
        return tma

    def check(name, kernel, dtype, shape, m, n, k, misalign=False, bias=False):
        nonlocal failures
        expect_tma = n % 8 == 0 and k % 8 == 0 and not misalign   # TMA: row strides of 16-byte multiples
        tdtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
        gen = torch.Generator(device="cuda").manual_seed(m * 7 + n * 3 + k)
        a = torch.randn(m, k + (1 if misalign else 0), device="cuda", generator=gen).to(tdtype)
        a = a[:, 1:] if misalign else a
        b = torch.randn(k, n, device="cuda", generator=gen).to(tdtype)
        out_dtype = torch.float32 if bias else tdtype
        c = torch.full((m, n), float("nan"), device="cuda", dtype=out_dtype)
        args = [a, b]
        want = a.float() @ b.float()
        if bias:
            vec = torch.randn(n, device="cuda", generator=gen)
            args.append(vec)
            want = torch.relu(want + vec)
        try:
            tma = launch(kernel, args, c, shape)
            torch.cuda.synchronize()
            err = ((c.float() - want).abs().max() / want.abs().max().clamp(min=1e-6)).item()
            ok = not math.isnan(err) and err < TOLERANCE["f32" if bias else dtype] and tma == expect_tma
        except Exception:  # noqa: BLE001 (a smoke test reports and goes on)
            traceback.print_exc()
            tma, err, ok = None, float("nan"), False
        failures += not ok
        say(f"{'ok  ' if ok else 'FAIL'} {name:<22} tile {shape!s:<11} M={m:<5} N={n:<5} K={k:<5} "
            f"{'TMA entry ' if tma else 'plain entry'}{' (misaligned a)' if misalign else ''}  max rel err {err:.2e}")
        if not ok and err > 0:
            describe_mismatch(torch, c.float(), want)

    for name, dtype in (("matmul_bf16", "bf16"), ("matmul_f16", "f16"), ("matmul_bf16_k32", "bf16")):
        kernel = getattr(mm, name)
        for shape in [list(s["c"]) for s in kernel.tile_shapes]:
            for m, n, k in RAGGED[:2]:
                check(name, kernel, dtype, shape, m, n, k)
    for m, n, k in RAGGED[2:]:
        check("matmul_bf16", mm.matmul_bf16, "bf16", [128, 256], m, n, k)
    check("matmul_bias_relu_f32", mm.matmul_bias_relu_f32, "f16", [128, 128], 300, 200, 96, bias=True)
    check("matmul_bf16", mm.matmul_bf16, "bf16", [128, 128], 100, 200, 64, misalign=True)
    failures += persistent(torch, tile, mm.matmul_bf16)

    for dtype, kernel in (("bf16", mm.matmul_bf16), ("f16", mm.matmul_f16)):
        for m, n, k in ((8192, 8192, 8192), (8192, 8192, 1024)):
            failures += bench(torch, tile, kernel, dtype, m, n, k)
    say("all checks passed" if not failures else f"{failures} check(s) FAILED")
    return 1 if failures else 0


def persistent(torch, tile, kernel) -> int:
    """A persistent launch: fewer blocks than tiles, each carrying its barriers' phases from tile to tile."""
    a = torch.randn(1000, 200, device="cuda").to(torch.bfloat16)
    b = torch.randn(200, 1000, device="cuda").to(torch.bfloat16)
    c = torch.full((1000, 1000), float("nan"), device="cuda", dtype=torch.bfloat16)
    try:
        pending = kernel(a, b, tile.partition(c, [64, 64], persistent=True))
        grid, tma = pending.grid, pending.uses_tma
        pending.launch()
        torch.cuda.synchronize()
        want = a.float() @ b.float()
        err = ((c.float() - want).abs().max() / want.abs().max()).item()
        ok = not math.isnan(err) and err < TOLERANCE["bf16"] and tma
    except Exception:  # noqa: BLE001 (a smoke test reports and goes on)
        traceback.print_exc()
        grid, tma, err, ok = None, None, float("nan"), False
    say(f"{'ok  ' if ok else 'FAIL'} persistent matmul_bf16 tile [64, 64] M=N=1000 K=200 grid {grid} "
        f"(256 tiles) {'TMA entry' if tma else 'plain entry'}  max rel err {err:.2e}")
    return 0 if ok else 1


def describe_mismatch(torch, got, want) -> None:
    """Where a result is wrong: how much of it, the first elements, and which rows and columns
    (a pattern there points at the layout that is off)."""
    bad = (got - want).abs() > 0.05 * want.abs().max()
    rows = bad.any(1).nonzero().flatten().tolist()
    cols = bad.any(0).nonzero().flatten().tolist()
    first = bad.nonzero()[:6].tolist()
    say(f"     {bad.float().mean().item():.1%} of the elements are off; first {first}; rows {rows[:24]}"
        f"{'...' if len(rows) > 24 else ''}; columns {cols[:24]}{'...' if len(cols) > 24 else ''}")
    if first:
        r, c = first[0]
        say(f"     at {r, c}: got {got[r, c].item():.4g}, want {want[r, c].item():.4g}")


def bench(torch, tile, kernel, dtype, m, n, k) -> int:
    tdtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    a = torch.randn(m, k, device="cuda", dtype=tdtype)
    b = torch.randn(k, n, device="cuda", dtype=tdtype)
    c = torch.empty(m, n, device="cuda", dtype=tdtype)
    part = [128, 256]

    def ours():
        kernel(a, b, tile.partition(c, part)).launch()

    def theirs():
        torch.matmul(a, b, out=c)

    times = {}
    for label, fn in (("buildtile", ours), ("torch", theirs)):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            fn()
        end.record()
        end.synchronize()
        times[label] = start.elapsed_time(end) / 10
    ours()
    torch.cuda.synchronize()
    want = a.float() @ b.float()
    err = ((c.float() - want).abs().max() / want.abs().max()).item()
    flops = 2 * m * n * k
    rate = {label: flops / (ms / 1e3) / 1e12 for label, ms in times.items()}
    ok = not math.isnan(err) and err < TOLERANCE[dtype]
    say(f"{'ok  ' if ok else 'FAIL'} {dtype} {m}x{n}x{k}: buildtile {rate['buildtile']:.0f} TFLOP/s "
        f"({times['buildtile']:.3f} ms), torch {rate['torch']:.0f} TFLOP/s, ratio "
        f"{rate['buildtile'] / rate['torch']:.2f}x, max rel err {err:.1e}")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", type=Path, help="only build the package into this folder")
    parser.add_argument("--prebuilt", type=Path, help="run the package built into this folder")
    args = parser.parse_args()
    if args.build:
        build(args.build)
        return 0
    if args.prebuilt:
        return run(args.prebuilt)
    with tempfile.TemporaryDirectory(prefix="hopper_smoke_") as tmp:
        build(Path(tmp))
        return run(Path(tmp))


if __name__ == "__main__":
    sys.exit(main())
