"""The default executor: each job in a forked process of this machine (:mod:`buildtile.isolation`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from buildtile.isolation import Outcome, run_isolated

if TYPE_CHECKING:
    from buildtile.jobs import Job


class LocalExecutor:
    def __init__(self, workers: int) -> None:
        self.workers = workers or os.cpu_count() or 1

    def run(self, jobs: Sequence[Job], opt_level: int,
            compile_here: Callable[[Job], Any]) -> Iterator[tuple[int, Outcome]]:
        return run_isolated([lambda job=job: compile_here(job) for job in jobs], self.workers)

    def close(self) -> None:
        pass
