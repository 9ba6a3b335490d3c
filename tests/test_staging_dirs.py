"""A build killed mid-way leaves a staging folder; the next build removes it, and never a live build's."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from buildtile.compiler import compile_project
from buildtile.config import load_project
from buildtile.staging_dirs import STALE_AFTER_S, new_staging_dir, remove_abandoned

FIXTURE = Path(__file__).parent / "fixtures" / "vecadd_project"
ROOT = Path(__file__).parent.parent

BUILD = """
import sys
from pathlib import Path
from buildtile.compiler import compile_project
from buildtile.config import load_project
compile_project(load_project(sys.argv[1]), Path(sys.argv[2]), log=lambda line: None)
"""


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("build", "_buildtile"))
    monkeypatch.setenv("BUILDTILE_CACHE_DIR", "off")   # every job compiles: the build lasts long enough to kill
    monkeypatch.setenv("BUILDTILE_JOBS", "1")
    return root


def staging_dirs(out: Path) -> list[Path]:
    return sorted(out.glob(".buildtile-*"))


def test_the_next_build_removes_what_a_killed_build_left(project, tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    build = subprocess.Popen([sys.executable, "-c", BUILD, str(project), str(out)], env=env,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not staging_dirs(out) and build.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert build.poll() is None, "the build ended before it could be killed"
        os.killpg(build.pid, signal.SIGKILL)   # the build and its compile workers
    finally:
        build.wait()
    (left,) = staging_dirs(out)
    assert not (out / "tiny_kernels").exists()

    compile_project(load_project(project), out, log=lambda line: None)
    assert staging_dirs(out) == []
    assert (out / "tiny_kernels" / "_buildtile" / "manifest.json").is_file()


def test_a_live_builds_folder_is_left_alone(tmp_path):
    out = tmp_path / "out"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        theirs = out / f".buildtile-{sleeper.pid}-abcdefgh"
        theirs.mkdir(parents=True)
        mine = new_staging_dir(out)
        assert mine.name.startswith(f".buildtile-{os.getpid()}-")
        assert remove_abandoned(out) == []
        assert staging_dirs(out) == sorted([theirs, mine])
    finally:
        sleeper.kill()
        sleeper.wait()
    assert remove_abandoned(out) == [theirs]   # its owner is gone now
    assert staging_dirs(out) == [mine]


def test_folders_without_an_owner_are_removed_once_a_day_old(tmp_path):
    young, old = tmp_path / ".buildtile-abc123_x", tmp_path / ".buildtile-zz9_kk00"
    young.mkdir()
    old.mkdir()
    (old / "kernels").mkdir()
    stamp = time.time() - STALE_AFTER_S - 60
    os.utime(old, (stamp, stamp))
    assert remove_abandoned(tmp_path) == [old]
    assert staging_dirs(tmp_path) == [young]


def test_only_staging_folders_are_touched(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / ".buildtile-99999999999999999999-file").write_text("a file, not a folder")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / ".buildtile-99999999999999999999-link").symlink_to(elsewhere, target_is_directory=True)
    dead = tmp_path / ".buildtile-99999999999999999999-abcdefgh"   # no such pid
    dead.mkdir()
    assert remove_abandoned(tmp_path) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".buildtile-99999999999999999999-file", ".buildtile-99999999999999999999-link", "elsewhere", "pkg"]
