"""Why SIMT kernels are coarsened: vecadd bandwidth per coarsening factor, against torch.

Compiles the example project's vecadd with 1, 2, 4 and 8 logical blocks per
physical block (the factor the compiler picks is ``COARSEN_FACTOR``), launches
each through CuPy's RawModule (so only the kernel differs), and prints TB/s
next to torch ``a + b`` and a device copy, all measured in this run.

    python benchmarks/coarsening_study.py [--gib 1]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from timing import time_checked_ms

ROOT = Path(__file__).resolve().parents[1]


def compile_variant(factor: int, target: str) -> tuple[bytes, str]:
    from buildtile.backend import CompileOptions
    from buildtile.compiler import discover
    from buildtile.config import load_project
    from buildtile.plugins import backends
    from buildtile.toolchain.nvjitlink import ptx_to_cubin

    impl = backends()["simt"].impl
    src = next(s for s in discover(load_project(ROOT / "example_project")) if s.name == "vecadd")
    kernel = impl.analyze(src, CompileOptions())
    kernel.contract["coarsen"] = factor
    ptx = impl.to_ptx(kernel, target, CompileOptions())
    return ptx_to_cubin(ptx, target), kernel.symbol


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    args = parser.parse_args()

    import cupy as cp
    import numpy as np
    import torch

    n = int(args.gib * (1 << 30)) // 4
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    major, minor = torch.cuda.get_device_capability()
    want = a + b

    def equal(x, what):
        def check():
            if not torch.equal(c, x):
                raise AssertionError(f"{what}: wrong result after timing")
        return check

    rows = [("device copy (ceiling)", time_checked_ms(torch, lambda: c.copy_(a), c, equal(a, "copy")), 2 * n * 4),
            ("torch a + b", time_checked_ms(torch, lambda: torch.add(a, b, out=c), c, equal(want, "torch add")),
             3 * n * 4)]
    blocks = (n + 255) // 256
    for factor in (1, 2, 4, 8):
        cubin, symbol = compile_variant(factor, f"sm_{major}{minor}")
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(cubin)
            f.flush()
            fn = cp.RawModule(path=f.name).get_function(symbol)
        params = (a.data_ptr(), np.int64(n), b.data_ptr(), np.int64(n), c.data_ptr(), np.int64(n))
        if factor > 1:
            params += (np.int64(blocks),)
        grid = ((blocks + factor - 1) // factor,)
        launch = lambda fn=fn, grid=grid, params=params: fn(grid, (256,), params)  # noqa: E731
        rows.append((f"buildtile vecadd x{factor}",
                     time_checked_ms(torch, launch, c, equal(want, f"coarsen={factor}")), 3 * n * 4))
    torch_bw = 3 * n * 4 / rows[1][1] / 1e9
    print(f"vecadd f32, n = {n:,}, {torch.cuda.get_device_name()}")
    for name, ms, nbytes in rows:
        bw = nbytes / ms / 1e9
        print(f"{name:<26}{ms:>8.3f} ms {bw:>6.2f} TB/s  {bw / torch_bw:>5.3f}x torch a+b")


if __name__ == "__main__":
    main()
