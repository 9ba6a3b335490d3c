"""Compiled kernels are cached by content: a rebuild with no change compiles nothing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from buildtile.cache import KernelCache, cache_key
from buildtile.compiler import compile_project
from buildtile.config import load_project

FIXTURE = Path(__file__).parent / "fixtures" / "vecadd_project"

#: a second kernel for the copy, so that "only that kernel" has another kernel to leave alone
SCALE = '''

@simt.kernel(block=256, requires=["len(x) == len(out)"])
def scale(alpha: f32, x: Slice[f32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = alpha * x[i]
'''


@pytest.fixture
def project_copy(tmp_path, monkeypatch):
    """The one-kernel fixture project plus a second kernel, with a cache of its own (two targets)."""
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("build", "_buildtile"))
    ops = root / "tiny_kernels" / "ops.py"
    ops.write_text(ops.read_text() + SCALE)
    monkeypatch.setenv("BUILDTILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BUILDTILE_JOBS", "1")
    return root


def build(root: Path, out: Path) -> list[str]:
    lines: list[str] = []
    compile_project(load_project(root), out, log=lines.append)
    return lines


def test_rebuild_without_change_compiles_nothing(project_copy, tmp_path):
    first = build(project_copy, tmp_path / "out1")
    assert len(first) == 4 and not any("(cached)" in line for line in first)   # 2 kernels x 2 targets
    second = build(project_copy, tmp_path / "out2")
    assert len(second) == len(first) and all(line.endswith("(cached)") for line in second)
    cubins = list((tmp_path / "out1").rglob("*.cubin"))
    assert len(cubins) == 4
    for cubin in cubins:
        twin = tmp_path / "out2" / cubin.relative_to(tmp_path / "out1")
        assert twin.read_bytes() == cubin.read_bytes()


def test_touching_one_kernel_recompiles_only_that_kernel(project_copy, tmp_path):
    build(project_copy, tmp_path / "out1")
    ops = project_copy / "tiny_kernels" / "ops.py"
    ops.write_text(ops.read_text().replace("out[i] = alpha * x[i]", "out[i] = alpha * x[i] + 1.0"))
    lines = build(project_copy, tmp_path / "out2")
    fresh = [line for line in lines if not line.endswith("(cached)")]
    assert len(fresh) == 2 and all(".scale ->" in line for line in fresh)   # one per target
    assert sum(".vecadd ->" in line for line in lines) == 2


def test_option_change_misses_the_cache(project_copy, tmp_path, monkeypatch):
    build(project_copy, tmp_path / "out1")
    monkeypatch.setenv("BUILDTILE_OPT_LEVEL", "2")
    assert not any(line.endswith("(cached)") for line in build(project_copy, tmp_path / "out2"))


FILES = {"ptx": b"ptx text " * 100, "cubin": b"\x7fELF" + bytes(range(256)) * 4}


def test_cache_entries_are_whole_or_absent(tmp_path):
    cache = KernelCache(tmp_path)
    key = cache_key("kernel", "sm_90")
    assert cache.get(key) is None
    cache.put(key, FILES)
    assert cache.get(key) == FILES
    # no temporary folders are left beside entries
    assert [p.name for p in (tmp_path / key[:2]).iterdir()] == [key]


def test_a_reader_never_sees_an_entry_being_written(tmp_path, monkeypatch):
    """Halfway through writing each file, the entry is still absent to a reader."""
    cache = KernelCache(tmp_path)
    key = cache_key("kernel", "sm_90")
    seen_midway = []
    write_bytes = Path.write_bytes

    def slow_write(path: Path, data: bytes) -> int:
        write_bytes(path, data[: len(data) // 2])       # half of it is on disk ...
        seen_midway.append((path.name, cache.get(key), (tmp_path / key[:2] / key).exists()))
        return write_bytes(path, data)                  # ... then all of it

    monkeypatch.setattr(Path, "write_bytes", slow_write)
    cache.put(key, FILES)
    assert [name for name, _, _ in seen_midway] == ["ptx", "cubin"]
    assert all(entry is None and not exists for _, entry, exists in seen_midway)
    assert cache.get(key) == FILES


def test_an_entry_is_published_by_one_rename_of_a_complete_folder(tmp_path, monkeypatch):
    cache = KernelCache(tmp_path)
    key = cache_key("kernel", "sm_90")
    renames = []
    replace = os.replace

    def checked_replace(src, dst):
        src, dst = Path(src), Path(dst)
        # at the moment of publishing: the folder is complete, beside the entry, and the entry absent
        renames.append((src.parent == dst.parent, {p.name: p.read_bytes() for p in src.iterdir()}, dst.exists()))
        return replace(src, dst)

    monkeypatch.setattr(os, "replace", checked_replace)
    cache.put(key, FILES)
    assert renames == [(True, FILES, False)]


def test_a_write_that_fails_midway_leaves_nothing(tmp_path, monkeypatch):
    cache = KernelCache(tmp_path)
    key = cache_key("kernel", "sm_90")
    write_bytes = Path.write_bytes

    def disk_full_at_cubin(path: Path, data: bytes) -> int:
        if path.name == "cubin":
            write_bytes(path, data[:10])
            raise OSError(28, "No space left on device")
        return write_bytes(path, data)

    monkeypatch.setattr(Path, "write_bytes", disk_full_at_cubin)
    cache.put(key, FILES)          # a full disk costs a recompile, never an error
    monkeypatch.undo()
    assert cache.get(key) is None
    assert list((tmp_path / key[:2]).iterdir()) == []
    cache.put(key, FILES)          # and the next build writes the entry whole
    assert cache.get(key) == FILES


def test_cache_can_be_turned_off(project_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("BUILDTILE_CACHE_DIR", "off")
    build(project_copy, tmp_path / "out1")
    assert not any(line.endswith("(cached)") for line in build(project_copy, tmp_path / "out2"))


def test_cache_key_is_length_prefixed():
    assert cache_key("ab", "c") != cache_key("a", "bc")
