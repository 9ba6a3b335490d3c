"""Identical inputs give byte-identical wheels (SOURCE_DATE_EPOCH honoured), tagged by content."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def build_twice(project: Path, tmp_path: Path, monkeypatch) -> tuple[str, list[str]]:
    """Two builds of ``project`` from fresh copies: the first takes its images from the session's
    kernel cache (compiled by this run's earlier builds, or by itself), the second compiles every
    one cold, in this process, now."""
    from buildtile import build

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    digests = []
    for k in range(2):
        work = tmp_path / f"build{k}"
        shutil.copytree(project, work / "p", ignore=shutil.ignore_patterns("build", "_buildtile"))
        if k:
            monkeypatch.setenv("BUILDTILE_CACHE_DIR", str(work / "cache"))   # an empty cache
        monkeypatch.chdir(work / "p")
        name = build.build_wheel(str(work / "dist"))
        digests.append(hashlib.sha256((work / "dist" / name).read_bytes()).hexdigest())
    return name, digests


@pytest.mark.parametrize("project, tag", [
    (ROOT / "tests/fixtures/vecadd_project", "py3-none-any"),       # cubin and PTX only
    (ROOT / "example_project", "py3-none-manylinux_"),              # with the C shim library: its manylinux tag
])
def test_wheel_is_byte_identical_and_tagged_by_content(project, tag, tmp_path, monkeypatch):
    name, digests = build_twice(project, tmp_path, monkeypatch)
    assert f"-{tag}" in name and name.endswith(".whl")
    assert digests[0] == digests[1]
