"""Compiled kernels are cached by content: a rebuild with no change compiles nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from buildtile.cache import KernelCache, cache_key
from buildtile.compiler import compile_project
from buildtile.config import load_project

FIXTURE = Path(__file__).parent.parent / "example_project"


@pytest.fixture
def project_copy(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("build", "cpp", "_buildtile"))
    text = (root / "pyproject.toml").read_text().replace("enabled = true", "enabled = false")
    (root / "pyproject.toml").write_text(text)
    monkeypatch.setenv("BUILDTILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BUILDTILE_JOBS", "1")
    return root


def build(root: Path, out: Path) -> list[str]:
    lines: list[str] = []
    compile_project(load_project(root), out, log=lines.append)
    return lines


def test_rebuild_without_change_compiles_nothing(project_copy, tmp_path):
    first = build(project_copy, tmp_path / "out1")
    assert first and not any("(cached)" in line for line in first)
    second = build(project_copy, tmp_path / "out2")
    assert len(second) == len(first) and all(line.endswith("(cached)") for line in second)
    for cubin in (tmp_path / "out1").rglob("*.cubin"):
        twin = tmp_path / "out2" / cubin.relative_to(tmp_path / "out1")
        assert twin.read_bytes() == cubin.read_bytes()


def test_touching_one_kernel_recompiles_only_that_kernel(project_copy, tmp_path):
    build(project_copy, tmp_path / "out1")
    ops = project_copy / "example_kernels" / "ops.py"
    ops.write_text(ops.read_text().replace("out[i] = alpha * x[i] + y[i]", "out[i] = alpha * x[i] - y[i]"))
    lines = build(project_copy, tmp_path / "out2")
    fresh = [line for line in lines if not line.endswith("(cached)")]
    assert fresh and all(".saxpy ->" in line for line in fresh)
    assert len(fresh) == 2   # one per target


def test_option_change_misses_the_cache(project_copy, tmp_path, monkeypatch):
    build(project_copy, tmp_path / "out1")
    monkeypatch.setenv("BUILDTILE_OPT_LEVEL", "2")
    assert not any(line.endswith("(cached)") for line in build(project_copy, tmp_path / "out2"))


def test_cache_entries_are_whole_or_absent(tmp_path):
    cache = KernelCache(tmp_path)
    key = cache_key("kernel", "sm_90")
    assert cache.get(key) is None
    cache.put(key, {"ptx": b"ptx text", "cubin": b"\x7fELF..."})
    assert cache.get(key) == {"ptx": b"ptx text", "cubin": b"\x7fELF..."}
    # no temporary folders are left beside entries
    assert [p.name for p in (tmp_path / key[:2]).iterdir()] == [key]


def test_cache_can_be_turned_off(project_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("BUILDTILE_CACHE_DIR", "off")
    build(project_copy, tmp_path / "out1")
    assert not any(line.endswith("(cached)") for line in build(project_copy, tmp_path / "out2"))


def test_cache_key_is_length_prefixed():
    assert cache_key("ab", "c") != cache_key("a", "bc")
