"""Building and installing wheels for the packaging tests: the example kernels' wheel, and
buildtile's own two distributions, each from a copy of the sources (builds write into their
project folders)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "example_project"
PACKAGE = "example_kernels"


def env(*paths: Path) -> dict[str, str]:
    """The environment of a subprocess that imports from ``paths``, then this tree's buildtile."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, paths), str(REPO)])}


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def pip(*args, **kwargs) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], **kwargs)


def build_example_wheel(work: Path) -> Path:
    """The example project's wheel, built by this tree's backend without build isolation."""
    project = work / "example_project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("build", "_buildtile", "__pycache__"))
    pip("wheel", "--no-build-isolation", "--no-deps", "-w", work / "dist", project, env=env())
    (wheel,) = (work / "dist").glob("example_kernels-*.whl")
    return wheel


def install(wheel: Path, site: Path) -> Path:
    """``wheel`` unpacked into ``site`` as pip installs it (with its .dist-info)."""
    pip("install", "--no-deps", "--no-compile", "--target", site, wheel)
    return site


def members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def dist_info_file(wheel: Path, name: str) -> str:
    files = members(wheel)
    (path,) = [p for p in files if p.split("/")[0].endswith(".dist-info") and p.split("/")[1] == name]
    return files[path].decode()
