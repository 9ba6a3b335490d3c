"""Build speed: example_project's kernel stage and wheel, and one kernel against nvcc.

Runs anywhere (no GPU). Every row checks the work it timed:

1. The kernel stage (``compile_project``, what ``buildtile build`` runs), in this process: cold,
   warm (no change), and after touching one kernel. The jobs compiled are counted from the build's
   log and asserted: all of them, none, and the touched kernel's targets only.
2. Whole wheels through the PEP 517 hook, each in a fresh Python process as pip runs it (CMake and
   the C shim included): warm, and after touching one kernel in a way not built before, so that
   exactly that kernel's jobs compile (asserted from the log; its cubins change, no other does).
3. One kernel for one target as whole fresh processes on both sides: ``python -m buildtile build``
   of a one-kernel project (cache off) against ``nvcc -cubin`` of the same kernel in CUDA C++. The
   kernel reads its thread index, so buildtile does not coarsen it (checked in the manifest) and
   both sides compile one element per thread. Then the same compile inside this process, with LLVM
   already loaded, labelled as such. Each cubin is checked to be an ELF image with the kernel's
   entry. Without nvcc on PATH its row says so and is skipped.

4. Beyond one machine: a synthetic project of ``--jobs`` kernel x target jobs (2,000 by default; 200 runs in a
   few minutes on a laptop) built cold by the local process pool, then by a Dask ``LocalCluster`` of each
   worker count in ``--workers``, then warm: by a machine whose local cache is empty, from a shared cache
   folder (``cache-remote``), and from its own local cache. Every cold build's cubins are checked equal to
   the local pool's. Prints jobs/s, the speed-up over one worker and per worker, the compile seconds per job
   and the bytes a job sends (LLVM IR) and brings back (PTX + cubin): the figures the docs' farm estimate
   is made from.

    python benchmarks/build_speed.py [--runs 5] [--jobs 2000] [--workers 1,2] [--farm-only]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = "sm_90"

#: the one-kernel project of part 3: vecadd, whose bounds test also reads threadIdx.x (always true for
#: block 256), which keeps it one element per thread; the CUDA C++ twin does the same
ONE_KERNEL_PYPROJECT = f"""
[build-system]
requires = ["buildtile"]
build-backend = "buildtile.build"

[project]
name = "onekernel"
version = "0.1.0"

[tool.buildtile]
kernels = ["onekernel.ops"]
targets = ["{TARGET}"]
ptx = false

[tool.buildtile.c-abi]
enabled = false
"""

ONE_KERNEL_OPS = """
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256, requires=["len(a) == len(c)", "len(b) == len(c)"])
def vecadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(c) and simt.thread_idx.x < 256:
        c[i] = a[i] + b[i]
"""

VECADD_CU = r"""
extern "C" __global__ void __launch_bounds__(256) vecadd(const float* a, long long na, const float* b,
                                                          long long nb, float* c, long long nc) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < nc && threadIdx.x < 256) c[i] = a[i] + b[i];
}
"""

JOB = re.compile(r"^\[\d+/\d+\] (.+) -> (sm_\d+) \(")


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def compiled_jobs(log: list[str]) -> list[str]:
    """``kernel -> target`` of every job the log says was compiled (not taken from the cache)."""
    return [f"{m[1]} -> {m[2]}" for line in log if (m := JOB.match(line)) and not line.endswith("(cached)")]


def all_jobs(log: list[str]) -> list[str]:
    return [f"{m[1]} -> {m[2]}" for line in log if (m := JOB.match(line))]


def check_cubin(data: bytes, entry: str, what: str) -> None:
    assert data[:4] == b"\x7fELF", f"{what}: not an ELF image"
    assert entry.encode() in data, f"{what}: no entry {entry}"


def env_with_this_buildtile(**extra: str) -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), path]) if path else str(ROOT), **extra}


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} no longer has {old!r}"
    path.write_text(text.replace(old, new))


# ----------------------------------------------------------------------------- 1 and 2: example_project

def kernel_stage_rows(project_dir: Path, work: Path) -> list[tuple[str, float, int]]:
    from buildtile.compiler import compile_project
    from buildtile.config import load_project

    def kernel_stage(tag: str) -> tuple[float, list[str], Path]:
        lines: list[str] = []
        out = work / f"out-{tag}"
        seconds, _ = timed(lambda: compile_project(load_project(project_dir), out, log=lines.append))
        return seconds, lines, out

    ops = project_dir / "example_kernels" / "ops.py"
    cold, cold_log, cold_out = kernel_stage("cold")
    jobs = all_jobs(cold_log)
    assert jobs and compiled_jobs(cold_log) == jobs, "a cold build must compile every job"
    cubins = {p.relative_to(cold_out): p.read_bytes() for p in cold_out.rglob("*.cubin")}
    assert len(cubins) == len(jobs), f"{len(jobs)} jobs but {len(cubins)} cubins"

    warm, warm_log, warm_out = kernel_stage("warm")
    assert compiled_jobs(warm_log) == [] and len(all_jobs(warm_log)) == len(jobs), "a warm build compiled something"
    assert {p.relative_to(warm_out): p.read_bytes() for p in warm_out.rglob("*.cubin")} == cubins

    edit(ops, "out[i] = alpha * x[i] + y[i]", "out[i] = y[i] + alpha * x[i]")
    touched, touched_log, _ = kernel_stage("touched")
    saxpy_jobs = [job for job in jobs if ".ops.saxpy -> " in job]
    assert sorted(compiled_jobs(touched_log)) == sorted(saxpy_jobs), compiled_jobs(touched_log)
    print(f"example_project: {len(jobs)} kernel x target jobs, {os.cpu_count()} cores")
    return [("cold", cold, len(jobs)), ("warm, no change", warm, 0), ("one kernel touched", touched, len(saxpy_jobs))]


def wheel_rows(project_dir: Path, work: Path) -> list[tuple[str, float, int]]:
    ops = project_dir / "example_kernels" / "ops.py"

    def wheel(tag: str) -> tuple[float, list[str], dict[str, bytes]]:
        out = work / f"wheel-{tag}"
        out.mkdir()
        cmd = [sys.executable, "-c", "import sys; from buildtile import build; build.build_wheel(sys.argv[1])", str(out)]
        seconds, proc = timed(lambda: subprocess.run(cmd, cwd=project_dir, env=env_with_this_buildtile(),
                                                     capture_output=True, text=True))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (path,) = out.glob("*.whl")
        with zipfile.ZipFile(path) as archive:
            cubins = {name: archive.read(name) for name in archive.namelist() if name.endswith(".cubin")}
        assert cubins, "the wheel has no cubins"
        return seconds, proc.stdout.splitlines(), cubins

    warm, warm_log, warm_cubins = wheel("warm")
    assert all_jobs(warm_log) and compiled_jobs(warm_log) == [], compiled_jobs(warm_log)
    edit(ops, "out[i] = y[i] + alpha * x[i]", "out[i] = alpha * x[i] - y[i]")   # built by no earlier row
    touched, touched_log, touched_cubins = wheel("touched")
    fresh = compiled_jobs(touched_log)
    assert fresh and all(".ops.saxpy -> " in job for job in fresh), fresh
    assert len(fresh) == sum(".ops.saxpy -> " in job for job in all_jobs(touched_log)), fresh
    changed = sorted(name for name in warm_cubins if touched_cubins.get(name) != warm_cubins[name])
    assert changed and all("saxpy" in name for name in changed) and set(touched_cubins) == set(warm_cubins), changed
    return [("whole wheel, warm", warm, 0), ("wheel, one kernel touched", touched, len(fresh))]


# ----------------------------------------------------------------------------- 3: one kernel against nvcc

def one_kernel_rows(work: Path, runs: int) -> list[tuple[str, float | None, str]]:
    project = work / "onekernel"
    (project / "onekernel").mkdir(parents=True)
    (project / "pyproject.toml").write_text(ONE_KERNEL_PYPROJECT)
    (project / "onekernel" / "__init__.py").write_text("")
    (project / "onekernel" / "ops.py").write_text(ONE_KERNEL_OPS)
    staged = project / "onekernel" / "_buildtile"
    buildtile_cmd = [sys.executable, "-m", "buildtile", "build", str(project)]
    buildtile_env = env_with_this_buildtile(BUILDTILE_CACHE_DIR="off", BUILDTILE_JOBS="1")

    def buildtile_process() -> float:
        shutil.rmtree(staged, ignore_errors=True)
        shutil.rmtree(project / "build", ignore_errors=True)
        seconds, proc = timed(lambda: subprocess.run(buildtile_cmd, env=buildtile_env, capture_output=True, text=True))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert compiled_jobs(proc.stdout.splitlines()) == [f"onekernel.ops.vecadd -> {TARGET}"], proc.stdout
        manifest = json.loads((staged / "manifest.json").read_text())
        (record,) = manifest["kernels"]
        assert record["contract"]["coarsen"] == 1, "the one-kernel benchmark's kernel was coarsened"
        check_cubin((staged / record["artifacts"][TARGET]["path"]).read_bytes(), record["symbol"], "buildtile")
        return seconds

    nvcc = shutil.which("nvcc")
    cu, cubin = work / "vecadd.cu", work / "vecadd.cubin"
    cu.write_text(VECADD_CU)
    nvcc_cmd = [nvcc or "nvcc", "-cubin", f"-arch={TARGET}", "-O3", str(cu), "-o", str(cubin)]

    def nvcc_process() -> float:
        cubin.unlink(missing_ok=True)
        seconds, proc = timed(lambda: subprocess.run(nvcc_cmd, capture_output=True, text=True))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        check_cubin(cubin.read_bytes(), "vecadd", "nvcc")
        return seconds

    ours, theirs = [], []
    buildtile_process()            # first runs untimed: files in the page cache for both
    if nvcc:
        nvcc_process()
    for _ in range(runs):          # in turns, so a slow spell of the machine hits both alike
        ours.append(buildtile_process())
        if nvcc:
            theirs.append(nvcc_process())

    # the same compile in this process: LLVM loaded and initialised, as in a build of many kernels
    from buildtile.backend import CompileOptions
    from buildtile.compiler import discover
    from buildtile.config import load_project
    from buildtile.plugins import backends
    from buildtile.toolchain.nvjitlink import ptx_to_cubin

    impl = backends()["simt"].impl
    (src,) = [s for s in discover(load_project(project)) if s.name == "vecadd"]
    options = CompileOptions()

    def in_process() -> bytes:
        kernel = impl.analyze(src, options)
        assert kernel.contract["coarsen"] == 1
        return ptx_to_cubin(impl.to_ptx(kernel, TARGET, options), TARGET)

    check_cubin(in_process(), "vecadd", "buildtile in process")
    samples = []
    for _ in range(max(runs, 10)):
        seconds, image = timed(in_process)
        check_cubin(image, "vecadd", "buildtile in process")
        samples.append(seconds)
    return [
        ("buildtile, fresh process", statistics.median(ours), "python -m buildtile build, cache off"),
        ("nvcc, fresh process", statistics.median(theirs) if nvcc else None,
         "nvcc -cubin -O3" if nvcc else "nvcc not found on PATH: skipped"),
        ("buildtile, in process", statistics.median(samples), "LLVM already loaded; not comparable to the rows above"),
    ]


# ----------------------------------------------------------------------------- 4: a cluster and a shared cache

FARM_TARGETS = ["sm_80", "sm_86", "sm_89", "sm_90"]
FARM_KERNELS_PER_MODULE = 50
FARM_KERNEL = """

@simt.kernel(block=256, requires=["len(x) == len(out)"])
def k{n}(alpha: f32, x: Slice[f32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = alpha * x[i] + {n}.0
"""


def synthetic_project(root: Path, jobs: int) -> int:
    """A project of about ``jobs`` kernel x target jobs (kernels that differ by a constant); the job count."""
    kernels = max(1, jobs // len(FARM_TARGETS))
    package = root / "farm_kernels"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    modules = []
    for start in range(0, kernels, FARM_KERNELS_PER_MODULE):
        name = f"m{start // FARM_KERNELS_PER_MODULE:03d}"
        body = "from buildtile import simt\nfrom buildtile.types import DisjointSlice, Slice, f32\n"
        body += "".join(FARM_KERNEL.format(n=n) for n in range(start, min(start + FARM_KERNELS_PER_MODULE, kernels)))
        (package / f"{name}.py").write_text(body)
        modules.append(f"farm_kernels.{name}")
    (root / "pyproject.toml").write_text(f"""
[build-system]
requires = ["buildtile"]
build-backend = "buildtile.build"

[project]
name = "farm-kernels"
version = "0.1.0"

[tool.buildtile]
kernels = {json.dumps(modules)}
targets = {json.dumps(FARM_TARGETS)}
ptx = false
""")
    return kernels * len(FARM_TARGETS)


def farm_rows(work: Path, jobs: int, worker_counts: list[int]) -> None:
    from buildtile.backend import CompileOptions
    from buildtile.compiler import analyze, compile_entries, compile_project, discover
    from buildtile.config import load_project

    project_dir = work / "farm"
    total = synthetic_project(project_dir, jobs)
    settings = {"BUILDTILE_CACHE_REMOTE": "", "BUILDTILE_EXECUTOR": "local", "BUILDTILE_JOBS": "0"}

    def build(tag: str, **env: str) -> tuple[float, list[str], dict]:
        saved = {name: os.environ.get(name) for name in {**settings, **env, "BUILDTILE_CACHE_DIR": ""}}
        os.environ.update({**settings, "BUILDTILE_CACHE_DIR": str(work / f"cache-{tag}"), **env})
        try:
            lines: list[str] = []
            seconds, manifest = timed(lambda: compile_project(load_project(project_dir), work / f"out-{tag}",
                                                              log=lines.append))
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        assert len(all_jobs(lines)) == total, f"{tag}: {len(all_jobs(lines))} jobs, expected {total}"
        return seconds, lines, manifest

    def cubins(tag: str) -> dict[Path, bytes]:
        out = work / f"out-{tag}"
        return {p.relative_to(out): p.read_bytes() for p in out.rglob("*.cubin")}

    cores = os.cpu_count() or 1
    print(f"\nsynthetic project: {total} kernel x target jobs ({total // len(FARM_TARGETS)} kernels x "
          f"{len(FARM_TARGETS)} targets), {cores} cores")
    rows: list[tuple[str, float, int]] = []
    local, local_log, manifest = build("local")
    assert compiled_jobs(local_log) == all_jobs(local_log)
    reference = cubins("local")
    rows.append((f"local pool, {cores} processes", local, cores))
    per_job = statistics.mean(manifest["_timings"].values())

    # what a job sends and brings back
    project = load_project(project_dir)
    options = CompileOptions(opt_level=project.settings.opt_level, checks=project.settings.checks)
    ir_bytes = [len(e.llvm_ir.encode()) for b in compile_entries(analyze(discover(project), options), options)
                for e in b.entries] * len(FARM_TARGETS)
    out_bytes = [f.stat().st_size for f in (work / "cache-local").rglob("*") if f.is_file()]
    assert len(out_bytes) == 2 * total, "the cache holds a PTX and a cubin per job"

    import distributed

    for n in worker_counts:
        with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster:
            address = "dask://" + cluster.scheduler_address.removeprefix("tcp://")
            with distributed.Client(cluster, set_as_default=False) as client:   # workers load LLVM before the clock starts
                client.run(lambda: __import__("buildtile.jobs"))
            seconds, log, _ = build(f"dask{n}", BUILDTILE_EXECUTOR=address, BUILDTILE_EXECUTOR_STRICT="1")
        assert compiled_jobs(log) == all_jobs(log) and cubins(f"dask{n}") == reference, f"dask {n}: differs"
        rows.append((f"dask, {n} worker{'s' if n > 1 else ''}", seconds, n))

    shared = work / "shared"
    build("publisher", BUILDTILE_CACHE_REMOTE=str(shared))          # fills the shared folder
    warm_shared, log, _ = build("consumer", BUILDTILE_CACHE_REMOTE=str(shared))
    assert compiled_jobs(log) == [] and cubins("consumer") == reference
    warm_local, log, _ = build("local")                              # its own cache, from the first row
    assert compiled_jobs(log) == []

    print(f"{'cold build':<28}{'seconds':>9}{'jobs/s':>9}{'speed-up':>10}{'per worker':>12}")
    dask_rows = [(seconds, n) for name, seconds, n in rows if name.startswith("dask")]
    # one worker's rate: measured, or the smallest cluster's divided by its size
    one_worker = min(dask_rows, key=lambda row: row[1]) if dask_rows else None
    for name, seconds, n in rows:
        line = f"{name:<28}{seconds:>9.2f}{total / seconds:>9.1f}"
        if name.startswith("dask") and one_worker is not None:
            speedup = one_worker[0] * one_worker[1] / seconds
            line += f"{speedup:>9.2f}x{speedup / n:>11.2f}x"
        print(line)
    print(f"{'warm, from a shared folder':<28}{warm_shared:>9.2f}{total / warm_shared:>9.1f}")
    print(f"{'warm, from the local cache':<28}{warm_local:>9.2f}{total / warm_local:>9.1f}")
    print(f"per job: {per_job * 1e3:.0f} ms of compile (LLVM IR -> PTX -> cubin), "
          f"{statistics.mean(ir_bytes) / 1e3:.1f} kB of LLVM IR in, "
          f"{sum(out_bytes) / total / 1e3:.1f} kB of PTX + cubin out; "
          f"front end and packaging of the whole project: {warm_local:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh-process runs per side (median reported)")
    parser.add_argument("--jobs", type=int, default=2000, help="kernel x target jobs of the synthetic project")
    parser.add_argument("--workers", default="1,2", help="Dask worker counts to build with, comma separated")
    parser.add_argument("--farm-only", action="store_true", help="only part 4 (a cluster and a shared cache)")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="buildtile-speed-"))
    try:
        if options.farm_only:
            farm_rows(work, options.jobs, [int(n) for n in options.workers.split(",")])
            return
        project_dir = work / "example_project"
        shutil.copytree(ROOT / "example_project", project_dir, ignore=shutil.ignore_patterns("build", "_buildtile"))
        os.environ["BUILDTILE_CACHE_DIR"] = str(work / "cache")   # cold, and shared by the wheel processes

        stage = kernel_stage_rows(project_dir, work)
        print(f"{'kernel stage (in process)':<32}{'seconds':>9}{'compiled':>10}")
        for name, seconds, compiled in stage:
            print(f"{name:<32}{seconds:>9.2f}{compiled:>10}")
        wheels = wheel_rows(project_dir, work)
        print(f"{'wheel (fresh process each)':<32}{'seconds':>9}{'compiled':>10}")
        for name, seconds, compiled in wheels:
            print(f"{name:<32}{seconds:>9.2f}{compiled:>10}")

        rows = one_kernel_rows(work, options.runs)
        print(f"\none kernel, one target (vecadd, not coarsened -> {TARGET} cubin), median of {options.runs} runs")
        for name, seconds, how in rows:
            figure = f"{seconds * 1e3:>8.0f} ms" if seconds is not None else f"{'-':>11}"
            print(f"{name:<32}{figure}   {how}")
        ours, theirs = rows[0][1], rows[1][1]
        if theirs is not None:
            print(f"fresh processes: buildtile / nvcc = {ours / theirs:.2f} (time ratio; < 1 is faster than nvcc)")
        farm_rows(work, options.jobs, [int(n) for n in options.workers.split(",")])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
