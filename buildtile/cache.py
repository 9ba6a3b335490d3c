"""The content-addressed cache of compiled kernels.

An entry is keyed by everything that decides its bytes (the kernel's LLVM IR
-- so its source, the helpers it calls and its contract --, the target, the
options, and the versions of buildtile, the backend, LLVM and nvJitLink) and
holds that kernel's PTX and cubin for one target. Entries are written to a
temporary folder and renamed into place, so a reader never sees half of one
and an interrupted build leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

FILES = ("ptx", "cubin")
#: the longest file name most file systems take (NAME_MAX), in bytes
_NAME_MAX = 255


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "buildtile"


def cache_disabled(setting: str) -> bool:
    """Whether the ``cache-dir`` setting turns the cache off: "off", in any case, spaces aside."""
    return setting.strip().lower() == "off"


def cache_dir_problem(setting: str) -> str | None:
    """What makes ``setting`` unusable as the cache folder, or None (for the settings reader)."""
    if cache_disabled(setting) or not setting:
        return None
    if "\0" in setting:
        return f"{setting!r} contains a NUL character, which no path can hold"
    expanded = os.path.expanduser(setting)
    if expanded.startswith("~"):
        user = setting[1:].split("/", 1)[0]
        if not user:
            return f"{setting!r} starts with ~, and this account's home folder is unknown"
        return f"{setting!r} starts with ~{user}, and there is no user {user!r} whose home it could be"
    too_long = [part for part in expanded.split(os.sep) if len(os.fsencode(part)) > _NAME_MAX]
    if too_long:
        return f"{setting!r} has a folder name of {len(os.fsencode(too_long[0]))} bytes; file systems take {_NAME_MAX}"
    return None


def resolve_cache_dir(setting: str) -> Path | None:
    """The cache folder from the ``cache-dir`` setting: "" = user cache, "off" = none.

    The settings reader has refused values :func:`cache_dir_problem` finds wrong.
    """
    if cache_disabled(setting):
        return None
    return Path(os.path.expanduser(setting)) if setting else default_cache_dir()


def cache_key(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))   # length-prefixed: ("ab","c") != ("a","bc")
        h.update(data)
    return h.hexdigest()


class KernelCache:
    def __init__(self, root: Path | None) -> None:
        self.root = root

    def _entry(self, key: str) -> Path:
        return self.root / key[:2] / key

    def get(self, key: str) -> dict[str, bytes] | None:
        if self.root is None:
            return None
        entry = self._entry(key)
        try:
            return {name: (entry / name).read_bytes() for name in FILES}
        except (OSError, ValueError):   # ValueError: a path the OS cannot take
            return None

    def put(self, key: str, files: dict[str, bytes]) -> None:
        if self.root is None:
            return
        entry = self._entry(key)
        try:
            if entry.exists():
                return
            entry.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=entry.parent))
        except (OSError, ValueError):
            return   # a read-only, full or unusable cache only costs a recompile next time
        try:
            for name in FILES:
                (tmp / name).write_bytes(files[name])
            os.replace(tmp, entry)
        except OSError:
            pass     # another build wrote the same entry first, or the disk is full
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
