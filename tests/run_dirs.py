"""Folders one test run shares between its pytest-xdist worker processes.

Each worker has its own temporary folder (``tmp_path_factory``); under xdist those are the
subfolders of one folder of the run, which this module hands out, so that what a session builds
(the kernel cache, the example wheel, the example kernels built for the emulator) is made once
per run rather than once per worker.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

_run_folder: Path | None = None   # set by the test configuration's session fixture


def run_root(tmp_path_factory) -> Path:
    """The temporary folder of the whole run: the workers' common parent under xdist, else the
    session's own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def share_the_run_folder(tmp_path_factory) -> None:
    """Make :func:`run_root` the folder that :func:`run_folder` hands out (once per session)."""
    global _run_folder
    _run_folder = run_root(tmp_path_factory)


def run_folder(name: str) -> Path:
    """``name`` in the run's folder, for code that has no ``tmp_path_factory`` at hand."""
    if _run_folder is None:
        raise RuntimeError("the run's folder is known once the session has started")
    return _run_folder / name


def made_once(folder: Path, make: Callable[[Path], Path]) -> Path:
    """``make(folder)``'s result, made by the first worker that asks and read by the others: the
    path it returned is recorded in ``folder``, under a file lock, once it is complete."""
    folder.mkdir(parents=True, exist_ok=True)
    done = folder / "made"
    with FileLock(str(folder) + ".lock"):
        if not done.exists():
            done.write_text(str(make(folder)))
    return Path(done.read_text())
