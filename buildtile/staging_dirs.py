"""The folders a build assembles its output in, and the removal of those interrupted builds left.

A build writes into a fresh ``.buildtile-<pid>-<random>`` folder beside its
output and swaps it in at the end, so a failed build leaves no half-written
tree. A build that is killed cannot remove its folder; the next build in the
same place does, once the process named in it is gone. Folders whose owner
cannot be asked about (made by an older buildtile, without a pid, or where
processes cannot be probed) are removed once they are a day old.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

PREFIX = ".buildtile-"
#: how old a leftover whose owner cannot be asked about must be before it is removed
STALE_AFTER_S = 24 * 3600

_OWNED = re.compile(re.escape(PREFIX) + r"(\d+)-")


def new_staging_dir(out_dir: Path) -> Path:
    """A fresh staging folder in ``out_dir`` for this build, after removing leftovers of dead builds."""
    out_dir.mkdir(parents=True, exist_ok=True)
    remove_abandoned(out_dir)
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=out_dir))


def remove_abandoned(out_dir: Path, *, now: float | None = None) -> list[Path]:
    """Remove the staging folders in ``out_dir`` that no live build owns; returns them."""
    now = time.time() if now is None else now
    removed = []
    try:
        entries = list(out_dir.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(PREFIX) or entry.is_symlink() or not entry.is_dir():
            continue
        if _owner_alive(entry, now):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def _owner_alive(entry: Path, now: float) -> bool:
    match = _OWNED.match(entry.name)
    if match is not None and os.name == "posix":
        return _process_alive(int(match.group(1)))
    try:
        return now - entry.stat().st_mtime < STALE_AFTER_S
    except OSError:
        return True   # gone already, or not ours to look at


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)   # signal 0 only asks whether the process exists
    except (ProcessLookupError, OverflowError):   # no such process (OverflowError: no such pid at all)
        return False
    except PermissionError:
        return True       # exists, under another user
    return True
