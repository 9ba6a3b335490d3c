"""A cache for a team: a shared tier behind the local cache.

The shared tier is a folder several machines use at once (a network file
system), or an fsspec URL (``s3://``, ``gs://``, ``http://``, ...). An entry
there is one file, a checksummed bundle of the PTX and cubin:

- a folder publishes it by writing a uniquely named temporary file beside it
  and hard-linking it into place (``os.link`` is atomic on NFS too, and the
  first writer wins); no locks are taken, so nothing relies on ``flock``;
- an object store publishes it with one PUT, which readers see whole or not
  at all;
- every reader checks the bundle's sha256, so a damaged or truncated entry is
  a miss (a recompile), never a wrong kernel.

Lookups go to the local cache first; a shared hit is copied into it. In
``read-only`` mode (CI jobs that consume what others built) the shared tier
is never written.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import uuid
from pathlib import Path
from typing import Protocol

from buildtile.cache import FILES, KernelCache

READ_WRITE = "read-write"
READ_ONLY = "read-only"
CACHE_MODES = (READ_WRITE, READ_ONLY)
#: first line of every bundle: the format, so a later layout is a miss rather than garbage
MAGIC = b"buildtile-cache-entry 1\n"


class Tier(Protocol):
    def get(self, key: str) -> dict[str, bytes] | None: ...

    def put(self, key: str, files: dict[str, bytes]) -> None: ...


def pack(files: dict[str, bytes]) -> bytes:
    """One bundle: the magic line, a JSON line of sizes and sha256, then the files' bytes."""
    payload = b"".join(files[name] for name in FILES)
    header = {"sizes": [len(files[name]) for name in FILES], "sha256": hashlib.sha256(payload).hexdigest()}
    return MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload


def unpack(data: bytes) -> dict[str, bytes] | None:
    """The files of a bundle, or None when it is not whole (wrong format, sizes or checksum)."""
    if not data.startswith(MAGIC):
        return None
    header_line, sep, payload = data[len(MAGIC):].partition(b"\n")
    try:
        header = json.loads(header_line)
        sizes, digest = [int(n) for n in header["sizes"]], str(header["sha256"])
    except (ValueError, KeyError, TypeError):
        return None
    if not sep or len(sizes) != len(FILES) or sum(sizes) != len(payload):
        return None
    if hashlib.sha256(payload).hexdigest() != digest:
        return None
    files, at = {}, 0
    for name, size in zip(FILES, sizes):
        files[name] = payload[at:at + size]
        at += size
    return files


class SharedFolderCache:
    """Bundles in a folder that several machines may read and write at the same time."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _entry(self, key: str) -> Path:
        return self.root / key[:2] / key

    def get(self, key: str) -> dict[str, bytes] | None:
        try:
            return unpack(self._entry(key).read_bytes())
        except (OSError, ValueError):
            return None

    def put(self, key: str, files: dict[str, bytes]) -> None:
        entry = self._entry(key)
        # host, process and a random part: two machines on one share never pick the same name
        tmp = entry.parent / f".tmp-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex}"
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as out:
                out.write(pack(files))
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(tmp, entry)          # atomic, and it refuses to replace: the first writer wins
            except FileExistsError:
                if self.get(key) is None:    # a damaged entry: a whole one takes its place
                    os.replace(tmp, entry)
            except OSError:                  # a file system without hard links
                os.replace(tmp, entry)
        except (OSError, ValueError):
            pass   # an unwritable or full share only costs a recompile elsewhere
        finally:
            try:
                tmp.unlink()
            except OSError:
                pass


class RemoteCache:
    """Bundles behind an fsspec URL; one object per entry."""

    def __init__(self, url: str) -> None:
        import fsspec

        self.url = url.rstrip("/")
        self.fs, self.prefix = fsspec.core.url_to_fs(self.url)
        self.prefix = self.prefix.rstrip("/")

    def _entry(self, key: str) -> str:
        return f"{self.prefix}/{key[:2]}/{key}"

    def get(self, key: str) -> dict[str, bytes] | None:
        try:
            return unpack(self.fs.cat_file(self._entry(key)))
        except Exception:   # absent, unreachable or refused: each is a miss, the build goes on
            return None

    def put(self, key: str, files: dict[str, bytes]) -> None:
        try:
            self.fs.pipe_file(self._entry(key), pack(files))
        except Exception:   # a read-only endpoint or a network error costs a recompile elsewhere
            pass


class TieredCache:
    """The local cache in front of a shared tier."""

    def __init__(self, local: KernelCache, shared: Tier, *, read_only: bool) -> None:
        self.local, self.shared, self.read_only = local, shared, read_only

    def get(self, key: str) -> dict[str, bytes] | None:
        hit = self.local.get(key)
        if hit is not None:
            return hit
        hit = self.shared.get(key)
        if hit is not None:
            self.local.put(key, hit)
        return hit

    def put(self, key: str, files: dict[str, bytes]) -> None:
        self.local.put(key, files)
        if not self.read_only:
            self.shared.put(key, files)


def is_url(setting: str) -> bool:
    return "://" in setting


def shared_tier(setting: str) -> Tier:
    """The shared tier the ``cache-remote`` setting names: a folder path, or an fsspec URL."""
    if is_url(setting) and not setting.startswith("file://"):
        return RemoteCache(setting)
    return SharedFolderCache(Path(os.path.expanduser(setting.removeprefix("file://"))))


def team_cache(local: KernelCache, remote: str, mode: str) -> KernelCache | TieredCache:
    """The build's cache: the local one alone, or in front of the shared tier ``remote`` names."""
    if not remote:
        return local
    return TieredCache(local, shared_tier(remote), read_only=mode == READ_ONLY)


def cache_remote_problem(setting: str) -> str | None:
    """What makes ``setting`` unusable as ``cache-remote``, or None (for the settings reader)."""
    if not setting or not is_url(setting) or setting.startswith("file://"):
        return None if "\0" not in setting else f"{setting!r} contains a NUL character, which no path can hold"
    protocol = setting.split("://", 1)[0]
    try:
        import fsspec
    except ImportError:
        return f"{setting!r} is a URL, and reading one needs the fsspec package (pip install fsspec)"
    try:
        fsspec.get_filesystem_class(protocol)
    except (ValueError, ImportError) as exc:
        return f"{setting!r}: fsspec cannot open {protocol}:// URLs here ({exc})"
    return None


def cache_mode_problem(mode: str) -> str | None:
    if mode not in CACHE_MODES:
        return f"must be \"read-write\" or \"read-only\", got {mode!r}"
    return None
