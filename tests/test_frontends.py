"""Other build frontends: `uv build` (sdist, then a wheel from it) builds example_project,
and the wheel rebuilt from the sdist is byte-identical to one built from the tree."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    assert Path(found).exists(), "uv is part of the test extra"
    return found


def test_uv_build_makes_sdist_and_an_identical_wheel_from_it(tmp_path, monkeypatch):
    # the session's kernel cache: what the isolated build lowers differently would miss it
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000"}
    # buildtile itself, as a wheel the isolated build can install
    for source in (ROOT / "runtime", ROOT):  # buildtile requires buildtile-runtime
        subprocess.run([uv(), "build", "--wheel", "-q", "-o", str(tmp_path / "links"), str(source)],
                       check=True, env=env)
    project = tmp_path / "example_project"
    shutil.copytree(ROOT / "example_project", project, ignore=shutil.ignore_patterns("build", "_buildtile"))
    subprocess.run([uv(), "build", "-q", "--find-links", str(tmp_path / "links"), "-o", str(tmp_path / "uv"),
                    str(project)], check=True, env=env)
    sdists = list((tmp_path / "uv").glob("*.tar.gz"))
    (from_sdist,) = (tmp_path / "uv").glob("*.whl")
    assert len(sdists) == 1

    from buildtile import build

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    monkeypatch.chdir(project)
    direct = tmp_path / "direct" / build.build_wheel(str(tmp_path / "direct"))
    assert direct.name == from_sdist.name
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    assert digest(direct) == digest(from_sdist)
