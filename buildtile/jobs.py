"""Compile (kernel x target) jobs: from the cache, in worker processes, or in line.

A job whose backend lowers to LLVM IR is a pure function of text (IR,
target, optimisation level), so it runs in a process pool; LLVM's state is
process-wide, which rules out threads.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Callable

from buildtile.toolchain.nvjitlink import ptx_to_cubin
from buildtile.toolchain.ptx import llvm_to_ptx

#: fewer uncached jobs than this compile in line: a worker process costs more to start
MIN_JOBS_FOR_POOL = 4


@dataclass
class Job:
    label: str                  # "pkg.ops.vecadd -> sm_90", for progress lines
    target: str
    key: str                    # cache key
    llvm_ir: str | None         # None: the backend makes PTX itself (``make_ptx``)
    make_ptx: Callable[[], str] | None = None
    ptx: str = ""
    cubin: bytes = b""
    seconds: float = 0.0
    cached: bool = False


def _compile_ir(llvm_ir: str, target: str, opt_level: int, name: str) -> tuple[str, bytes, float]:
    start = time.perf_counter()
    ptx = llvm_to_ptx(llvm_ir, target, opt_level)
    cubin = ptx_to_cubin(ptx, target, name=name, opt_level=opt_level)
    return ptx, cubin, time.perf_counter() - start


def run_jobs(jobs: list[Job], cache, opt_level: int, workers: int, progress: Callable[[Job, int, int], None]) -> None:
    """Fill in every job's PTX and cubin; reports each as it completes."""
    total, done = len(jobs), 0
    pending = []
    for job in jobs:
        hit = cache.get(job.key)
        if hit is not None:
            job.ptx, job.cubin, job.cached = hit["ptx"].decode(), hit["cubin"], True
            done += 1
            progress(job, done, total)
        else:
            pending.append(job)

    def finish(job: Job) -> None:
        nonlocal done
        cache.put(job.key, {"ptx": job.ptx.encode(), "cubin": job.cubin})
        done += 1
        progress(job, done, total)

    poolable = [j for j in pending if j.llvm_ir is not None]
    workers = workers or os.cpu_count() or 1
    if workers > 1 and len(poolable) >= MIN_JOBS_FOR_POOL:
        with ProcessPoolExecutor(max_workers=min(workers, len(poolable))) as pool:
            futures = {pool.submit(_compile_ir, j.llvm_ir, j.target, opt_level, f"{j.label}.ptx"): j
                       for j in poolable}
            for future, job in futures.items():
                job.ptx, job.cubin, job.seconds = future.result()
                finish(job)
        pending = [j for j in pending if j.llvm_ir is None]
    for job in pending:
        if job.llvm_ir is not None:
            job.ptx, job.cubin, job.seconds = _compile_ir(job.llvm_ir, job.target, opt_level, f"{job.label}.ptx")
        else:
            start = time.perf_counter()
            job.ptx = job.make_ptx()
            job.cubin = ptx_to_cubin(job.ptx, job.target, name=f"{job.label}.ptx", opt_level=opt_level)
            job.seconds = time.perf_counter() - start
        finish(job)


class Progress:
    """Kernel x target progress: a redrawn bar on a terminal, plain lines in logs."""

    def __init__(self, log: Callable[[str], None], stream=None) -> None:
        self.log = log
        self.stream = stream if stream is not None else sys.stderr
        self.tty = log is print and hasattr(self.stream, "isatty") and self.stream.isatty()

    def __call__(self, job: Job, done: int, total: int) -> None:
        what = "cached" if job.cached else f"{job.seconds * 1e3:.0f} ms"
        if self.tty:
            width = 24
            filled = width * done // total
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {job.label} ({what})\x1b[K")
            if done == total:
                self.stream.write("\n")
            self.stream.flush()
        else:
            self.log(f"[{done}/{total}] {job.label} ({what})")
