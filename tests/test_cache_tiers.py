"""The team cache: checksummed bundles, a shared folder written by many processes at once without locks,
the local cache in front of a shared tier, read-only consumers, and an S3 bucket on a real server."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from buildtile.cache import KernelCache, cache_key
from buildtile.cache_tiers import SharedFolderCache, TieredCache, pack, unpack
from buildtile.compiler import compile_project
from buildtile.config import load_project, read_settings
from buildtile.errors import ConfigError

FIXTURE = Path(__file__).parent / "fixtures" / "vecadd_project"
FILES = {"ptx": b".version 8.0\n" * 50, "cubin": b"\x7fELF" + bytes(range(256)) * 8}
KEY = cache_key("kernel", "sm_90")


class MemoryTier:
    def __init__(self) -> None:
        self.entries: dict[str, dict[str, bytes]] = {}

    def get(self, key):
        return self.entries.get(key)

    def put(self, key, files):
        self.entries[key] = dict(files)


def test_a_bundle_round_trips_and_any_damage_reads_as_a_miss():
    data = pack(FILES)
    assert unpack(data) == FILES
    flipped = bytearray(data)
    flipped[-100] ^= 1
    assert unpack(bytes(flipped)) is None                 # one bit of the cubin: the checksum says no
    assert unpack(data[:-1]) is None                      # truncated
    assert unpack(data + b"x") is None                    # longer than its sizes
    assert unpack(b"garbage") is None and unpack(b"") is None


def test_the_shared_folder_publishes_by_link_and_leaves_no_temporary_files(tmp_path):
    shared = SharedFolderCache(tmp_path)
    assert shared.get(KEY) is None
    shared.put(KEY, FILES)
    assert shared.get(KEY) == FILES
    assert [p.name for p in (tmp_path / KEY[:2]).iterdir()] == [KEY]
    shared.put(KEY, {"ptx": b"other", "cubin": b"other"})   # the first writer wins
    assert shared.get(KEY) == FILES


def test_a_damaged_shared_entry_is_a_miss_and_the_next_writer_replaces_it(tmp_path):
    shared = SharedFolderCache(tmp_path)
    shared.put(KEY, FILES)
    entry = tmp_path / KEY[:2] / KEY
    entry.write_bytes(entry.read_bytes()[:-10])            # cut short, as a crashed copy would leave it
    assert shared.get(KEY) is None
    shared.put(KEY, FILES)
    assert shared.get(KEY) == FILES


def _publish(root: str, n: int) -> None:
    cache = SharedFolderCache(Path(root))
    for k in range(20):
        cache.put(cache_key("kernel", str(k)), {"ptx": FILES["ptx"] * (1 + n % 3), "cubin": FILES["cubin"]})


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_many_processes_publish_into_one_folder_at_once(tmp_path):
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_publish, args=(str(tmp_path), n)) for n in range(6)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    assert all(w.exitcode == 0 for w in writers)
    shared = SharedFolderCache(tmp_path)
    for k in range(20):
        entry = shared.get(cache_key("kernel", str(k)))
        assert entry is not None and entry["cubin"] == FILES["cubin"]   # whole: one writer's bytes
    assert not [p for p in tmp_path.rglob(".tmp-*")]


def test_the_local_cache_is_in_front_and_a_shared_hit_fills_it(tmp_path):
    shared = MemoryTier()
    shared.put(KEY, FILES)
    local = KernelCache(tmp_path / "local")
    cache = TieredCache(local, shared, read_only=False)
    assert cache.get(KEY) == FILES and local.get(KEY) == FILES
    other = cache_key("other", "sm_80")
    cache.put(other, FILES)
    assert shared.get(other) == FILES and local.get(other) == FILES


def test_a_read_only_consumer_never_publishes(tmp_path):
    shared = MemoryTier()
    cache = TieredCache(KernelCache(tmp_path / "local"), shared, read_only=True)
    cache.put(KEY, FILES)
    assert shared.entries == {} and cache.get(KEY) == FILES   # its own local cache still fills


@pytest.mark.parametrize("key, value, expected", [
    ("cache-mode", "write-only", 'must be "read-write" or "read-only"'),
    ("cache-remote", "nosuchprotocol://bucket/prefix", "fsspec cannot open nosuchprotocol://"),
])
def test_bad_team_cache_settings_are_refused_naming_the_key(key, value, expected):
    with pytest.raises(ConfigError) as info:
        read_settings({"kernels": ["pkg.ops"], key: value}, "pyproject.toml", env={})
    assert f"tool.buildtile.{key}" in str(info.value) and expected in str(info.value)


# ----------------------------------------------------------------------------- a real S3 server

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3-compatible server in a process of its own, on a free port; its endpoint URL."""
    pytest.importorskip("s3fs")
    server = Path(sys.executable).with_name("moto_server")
    if not server.exists():
        pytest.skip("moto_server is not installed (pip install 'moto[server]')")
    port = free_port()
    process = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("moto_server did not start")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def s3(s3_server, monkeypatch):
    import s3fs

    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": s3_server}.items():
        monkeypatch.setenv(name, value)
    fs = s3fs.S3FileSystem(endpoint_url=s3_server, key="testing", secret="testing", skip_instance_cache=True)
    bucket = f"team-{os.getpid()}-{time.monotonic_ns()}"
    fs.mkdir(bucket)
    return fs, bucket


def build(root: Path, out: Path) -> list[str]:
    lines: list[str] = []
    compile_project(load_project(root), out, log=lines.append)
    return lines


def test_an_s3_bucket_serves_a_machine_with_an_empty_local_cache(s3, tmp_path, monkeypatch):
    fs, bucket = s3
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("build", "_buildtile"))
    monkeypatch.setenv("BUILDTILE_CACHE_REMOTE", f"s3://{bucket}/kernels")
    monkeypatch.setenv("BUILDTILE_JOBS", "1")

    monkeypatch.setenv("BUILDTILE_CACHE_DIR", str(tmp_path / "machine-a"))
    first = build(root, tmp_path / "out-a")
    assert len(first) == 2 and not any(line.endswith("(cached)") for line in first)
    assert len(fs.find(f"{bucket}/kernels")) == 2                       # both targets published

    monkeypatch.setenv("BUILDTILE_CACHE_DIR", str(tmp_path / "machine-b"))   # another machine, cold
    second = build(root, tmp_path / "out-b")
    assert len(second) == 2 and all(line.endswith("(cached)") for line in second)
    for cubin in (tmp_path / "out-a").rglob("*.cubin"):
        assert (tmp_path / "out-b" / cubin.relative_to(tmp_path / "out-a")).read_bytes() == cubin.read_bytes()

    # a damaged object is a miss: machine c recompiles that job rather than ship it
    (damaged, *_) = sorted(fs.find(f"{bucket}/kernels"))
    fs.pipe_file(damaged, fs.cat_file(damaged)[:-1])
    monkeypatch.setenv("BUILDTILE_CACHE_DIR", str(tmp_path / "machine-c"))
    third = build(root, tmp_path / "out-c")
    assert sum(not line.endswith("(cached)") for line in third) == 1


def test_a_read_only_consumer_takes_from_the_bucket_and_adds_nothing(s3, tmp_path, monkeypatch):
    fs, bucket = s3
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("build", "_buildtile"))
    monkeypatch.setenv("BUILDTILE_CACHE_REMOTE", f"s3://{bucket}/kernels")
    monkeypatch.setenv("BUILDTILE_JOBS", "1")
    monkeypatch.setenv("BUILDTILE_CACHE_DIR", str(tmp_path / "producer"))
    build(root, tmp_path / "out-producer")
    published = sorted(fs.find(f"{bucket}/kernels"))

    monkeypatch.setenv("BUILDTILE_CACHE_DIR", str(tmp_path / "ci"))
    monkeypatch.setenv("BUILDTILE_CACHE_MODE", "read-only")
    assert all(line.endswith("(cached)") for line in build(root, tmp_path / "out-ci"))
    monkeypatch.setenv("BUILDTILE_OPT_LEVEL", "2")                     # jobs the bucket has not seen
    assert not any(line.endswith("(cached)") for line in build(root, tmp_path / "out-ci2"))
    assert sorted(fs.find(f"{bucket}/kernels")) == published
