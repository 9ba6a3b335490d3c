"""Compile jobs on a Dask distributed cluster.

A job travels as plain data -- LLVM IR, target, options -- and comes back as
PTX text and cubin bytes, so workers need buildtile (its toolchain) but not
the project's sources. A job whose PTX the backend makes itself (no LLVM IR)
needs the backend's state and runs on this machine instead. A worker lost
mid-job is replaced by the scheduler, which runs its tasks again elsewhere;
a task that raises is retried once before its error is reported.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from buildtile.executors.local import LocalExecutor
from buildtile.isolation import Died, Outcome, Raised, Returned
from buildtile.jobs import compile_ir

if TYPE_CHECKING:
    from buildtile.jobs import Job

#: how long a build waits for the scheduler before it counts as unreachable
CONNECT_SECONDS = 5.0
#: further attempts of a task that raised (a lost worker is rescheduled by Dask itself)
RETRIES = 1


class DaskUnavailable(Exception):
    """The cluster cannot be used: ``distributed`` is not installed, or the scheduler does not answer."""


class DaskExecutor:
    def __init__(self, address: str, workers: int) -> None:
        try:
            import distributed
        except ImportError:
            raise DaskUnavailable("the distributed package is not installed (pip install buildtile[dask])") from None
        try:
            self.client = distributed.Client(address, timeout=CONNECT_SECONDS, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise DaskUnavailable(f"no Dask scheduler answered at {address} within {CONNECT_SECONDS:g} s "
                                  f"({type(exc).__name__})") from None
        self.local = LocalExecutor(workers)

    def run(self, jobs: Sequence[Job], opt_level: int,
            compile_here: Callable[[Job], Any]) -> Iterator[tuple[int, Outcome]]:
        from distributed import as_completed

        remote = [i for i, job in enumerate(jobs) if job.llvm_ir is not None]
        here = [i for i, job in enumerate(jobs) if job.llvm_ir is None]
        futures = {
            self.client.submit(compile_ir, jobs[i].llvm_ir, jobs[i].target, opt_level, f"{jobs[i].label}.ptx",
                               key=task_key(jobs[i]), retries=RETRIES, pure=False): i
            for i in remote
        }
        try:
            if here:
                for j, outcome in self.local.run([jobs[i] for i in here], opt_level, compile_here):
                    yield here[j], outcome
            for future in as_completed(futures, loop=self.client.loop):
                yield futures[future], _outcome(future)
        finally:
            for future in futures:
                future.release()

    def close(self) -> None:
        self.client.close()


def task_key(job: Job) -> str:
    """A task name unique to the job's content and label, readable in the Dask dashboard."""
    digest = hashlib.sha256(f"{job.key}\0{job.label}".encode()).hexdigest()[:32]
    return f"buildtile-compile-{digest}"


def _outcome(future) -> Outcome:
    from distributed import KilledWorker

    try:
        return Returned(future.result())
    except KilledWorker as exc:
        # every worker that took it died: what crashed them (LLVM aborting, memory) is in their logs
        return Died("ended every Dask worker that ran it", str(exc))
    except Exception as exc:
        return Raised(exc)
