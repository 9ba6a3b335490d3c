"""Build speed of example_project: cold, warm (no change), after touching one kernel.

Runs anywhere (no GPU). Each scenario is timed twice: the kernel stage alone
(`compile_project`, what `buildtile build` runs) and a whole wheel through
the PEP 517 hook (`buildtile.build.build_wheel`, what pip calls, CMake and
the C shim included). Then one kernel for one target, in process, against
`nvcc -cubin` compiling the same kernel written in CUDA C++ (when nvcc is on
PATH).

    python benchmarks/build_speed.py
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

VECADD_CU = r"""
extern "C" __global__ void __launch_bounds__(256) vecadd(const float* a, long long na, const float* b,
                                                          long long nb, float* c, long long nc) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < nc) c[i] = a[i] + b[i];
}
"""


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    from buildtile.compiler import compile_project
    from buildtile.config import load_project

    work = Path(tempfile.mkdtemp(prefix="buildtile-speed-"))
    project_dir = work / "example_project"
    shutil.copytree(ROOT / "example_project", project_dir, ignore=shutil.ignore_patterns("build", "_buildtile"))
    os.environ["BUILDTILE_CACHE_DIR"] = str(work / "cache")

    def kernel_stage(tag: str):
        lines: list[str] = []
        seconds, _ = timed(lambda: compile_project(load_project(project_dir), work / f"out-{tag}", log=lines.append))
        return seconds, sum(not line.endswith("(cached)") for line in lines), len(lines)

    def wheel(tag: str):
        from buildtile import build

        out = work / f"wheel-{tag}"
        out.mkdir()
        cwd = os.getcwd()
        os.chdir(project_dir)
        try:
            seconds, _ = timed(lambda: build.build_wheel(str(out)))
        finally:
            os.chdir(cwd)
        return seconds

    rows = []
    rows.append(("cold", *kernel_stage("cold")))
    rows.append(("warm, no change", *kernel_stage("warm")))
    ops = project_dir / "example_kernels" / "ops.py"
    ops.write_text(ops.read_text().replace("out[i] = alpha * x[i] + y[i]", "out[i] = y[i] + alpha * x[i]"))
    rows.append(("one kernel touched", *kernel_stage("touched")))
    print(f"example_project: {rows[0][3]} kernel x target jobs, {os.cpu_count()} cores")
    print(f"{'kernel stage':<22}{'seconds':>9}{'compiled':>10}")
    for name, seconds, compiled, _ in rows:
        print(f"{name:<22}{seconds:>9.2f}{compiled:>10}")

    wheel_rows = [("whole wheel, warm", wheel("warm"))]
    ops.write_text(ops.read_text().replace("out[i] = y[i] + alpha * x[i]", "out[i] = alpha * x[i] + y[i]"))
    wheel_rows.append(("wheel, one touched", wheel("touched")))
    for name, seconds in wheel_rows:
        print(f"{name:<22}{seconds:>9.2f}")

    # one kernel, one target, in process (LLVM already initialised, as in a build)
    from buildtile.backend import CompileOptions
    from buildtile.compiler import discover
    from buildtile.plugins import backends
    from buildtile.toolchain.nvjitlink import ptx_to_cubin

    impl = backends()["simt"].impl
    src = next(s for s in discover(load_project(project_dir)) if s.name == "vecadd")
    options = CompileOptions()

    def one_kernel():
        kernel = impl.analyze(src, options)
        return ptx_to_cubin(impl.to_ptx(kernel, "sm_90", options), "sm_90")

    one_kernel()
    ours = statistics.median(timed(one_kernel)[0] for _ in range(10))
    print(f"\none kernel, one target (vecadd -> sm_90 cubin): buildtile {ours * 1e3:.1f} ms", end="")
    nvcc = shutil.which("nvcc")
    if nvcc:
        cu = work / "vecadd.cu"
        cu.write_text(VECADD_CU)
        cmd = [nvcc, "-cubin", "-arch=sm_90", "-O3", str(cu), "-o", str(work / "vecadd.cubin")]
        subprocess.run(cmd, check=True)
        theirs = statistics.median(timed(lambda: subprocess.run(cmd, check=True))[0] for _ in range(5))
        print(f", nvcc {theirs * 1e3:.1f} ms  ({theirs / ours:.1f}x faster than nvcc)")
    else:
        print(" (nvcc not found: no reference)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
