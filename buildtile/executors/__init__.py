"""Where a build's compile jobs run: a process pool on this machine (the default), or a Dask cluster.

An executor takes the build's uncached jobs and yields ``(index, outcome)``
as each one ends (outcomes as :mod:`buildtile.isolation` reports them);
:func:`buildtile.jobs.run_jobs` keeps the cache and the progress lines. The
Dask executor is imported only when a build asks for one, so ``distributed``
stays an optional extra (``buildtile[dask]``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from buildtile.errors import BuildtileError
from buildtile.executors.local import LocalExecutor
from buildtile.isolation import Outcome

if TYPE_CHECKING:
    from buildtile.jobs import Job

LOCAL = "local"
DASK_SCHEME = "dask://"
#: the code of a build that asked strictly for a cluster it could not use
UNREACHABLE = "BT0040"


class Executor(Protocol):
    def run(self, jobs: Sequence[Job], opt_level: int,
            compile_here: Callable[[Job], Any]) -> Iterator[tuple[int, Outcome]]:
        """Each job's outcome as it ends; ``compile_here(job)`` compiles one job in this process."""
        ...

    def close(self) -> None:
        ...


def executor_problem(setting: str) -> str | None:
    """What makes ``setting`` unusable as the ``executor`` setting, or None (for the settings reader)."""
    if setting == LOCAL:
        return None
    if setting.startswith(DASK_SCHEME):
        host, _, port = setting[len(DASK_SCHEME):].rpartition(":")
        if host and port.isdigit() and 0 < int(port) < 65536:
            return None
        return f"{setting!r} names no scheduler: write dask://HOST:PORT, such as dask://scheduler:8786"
    return f"must be \"local\" or \"dask://HOST:PORT\", got {setting!r}"


def open_executor(setting: str, *, workers: int, strict: bool, warn: Callable[[str], None]) -> Executor:
    """The executor the ``executor`` setting names. A cluster that cannot be used is, in strict
    mode, an error; otherwise one warning line, and the jobs run on this machine."""
    if setting == LOCAL:
        return LocalExecutor(workers)
    address = "tcp://" + setting[len(DASK_SCHEME):]
    from buildtile.executors.dask import DaskExecutor, DaskUnavailable

    try:
        return DaskExecutor(address, workers)
    except DaskUnavailable as exc:
        if strict:
            raise BuildtileError(
                f"executor {setting!r}: {exc}", code=UNREACHABLE,
                help="start the scheduler, fix tool.buildtile.executor, or set executor-strict = false "
                     "to compile on this machine when the cluster is away") from None
        warn(f"warning: executor {setting!r}: {exc}; compiling on this machine")
        return LocalExecutor(workers)
