"""Compile (kernel x target) jobs: from the cache, or each in a worker process of its own.

Every uncached job runs in a child process (:mod:`buildtile.isolation`):
LLVM's state is process-wide, which rules out threads, and LLVM answers
some inputs by aborting its process. A job whose process dies is reported
as a toolchain error naming its kernel and target, with what LLVM printed;
the other jobs finish and are cached.
"""

from __future__ import annotations

import sys
import time
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from buildtile.errors import ToolchainError
from buildtile.executors.local import LocalExecutor
from buildtile.isolation import Died, Raised
from buildtile.toolchain.nvjitlink import ptx_to_fitted_cubin
from buildtile.toolchain.ptx import llvm_to_ptx

if TYPE_CHECKING:
    from buildtile.executors import Executor

#: how many lines of a crashed job's standard error its diagnostic quotes
CRASH_LINES = 12


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


def compile_ir(llvm_ir: str, target: str, opt_level: int, name: str) -> tuple[str, bytes, float]:
    """PTX, cubin and the seconds they took, from plain data (what a cluster's worker runs)."""
    start = time.perf_counter()
    ptx, cubin = ptx_to_fitted_cubin(llvm_to_ptx(llvm_ir, target, opt_level), target, name=name, opt_level=opt_level)
    return ptx, cubin, time.perf_counter() - start


def compile_job(job: Job, opt_level: int) -> tuple[str, bytes, float]:
    """The job's PTX, cubin and the seconds they took, made in this process."""
    if job.llvm_ir is not None:
        return compile_ir(job.llvm_ir, job.target, opt_level, f"{job.label}.ptx")
    start = time.perf_counter()
    ptx, cubin = ptx_to_fitted_cubin(job.make_ptx(), job.target, name=f"{job.label}.ptx", opt_level=opt_level)
    return ptx, cubin, time.perf_counter() - start


def run_jobs(jobs: list[Job], cache, opt_level: int, workers: int, progress: Callable[[Job, int, int], None],
             executor: Executor | None = None) -> None:
    """Fill in every job's PTX and cubin; reports each as it completes (in the jobs' order).

    Uncached jobs run on ``executor`` (:mod:`buildtile.executors`), by default a pool of
    ``workers`` processes on this machine."""
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

    if executor is None:
        executor = LocalExecutor(workers)
    arrived: dict[int, tuple[str, bytes, float] | None] = {}   # None: the job's process died
    crashed: list[tuple[Job, Died]] = []
    next_index = 0
    with closing(executor.run(pending, opt_level, lambda job: compile_job(job, opt_level))) as outcomes:
        # closing kills the rest
        for index, outcome in outcomes:
            if isinstance(outcome, Raised):
                raise outcome.error
            if isinstance(outcome, Died):
                crashed.append((pending[index], outcome))
                arrived[index] = None
            else:
                arrived[index] = outcome.value
            while next_index in arrived:
                result = arrived.pop(next_index)
                job = pending[next_index]
                next_index += 1
                if result is None:
                    continue
                job.ptx, job.cubin, job.seconds = result
                cache.put(job.key, {"ptx": job.ptx.encode(), "cubin": job.cubin})
                done += 1
                progress(job, done, total)
    if crashed:
        raise crash_error(crashed)


def crash_error(crashed: list[tuple[Job, Died]]) -> ToolchainError:
    """One error for every job whose process died, each named, with what the toolchain printed."""
    parts = []
    for job, died in crashed:
        kernel = job.label.removesuffix(f" -> {job.target}")
        lines = [line for line in died.stderr.splitlines() if line.strip()]
        quoted = "\n".join(f"    {line}" for line in lines[:CRASH_LINES])
        if len(lines) > CRASH_LINES:
            quoted += f"\n    ... ({len(lines) - CRASH_LINES} more lines)"
        parts.append(f"the toolchain crashed compiling kernel `{kernel}` for {job.target} "
                     f"(its process {died.how})" + (f":\n{quoted}" if quoted else ""))
    return ToolchainError(
        "\n".join(parts),
        help="the kernel passed every check, so this is a bug in buildtile or LLVM: please report it with "
             "the kernel's source, the target and `buildtile doctor`'s output",
    )


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
