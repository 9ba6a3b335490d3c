"""A wheel build says what it is doing while the kernels compile: a line when compiling starts,
one per kernel and target, one when it is done, on stderr and flushed, as scikit-build-core
reports. pip shows a backend's output live with -v; `python -m build` always."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "vecadd_project"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("build", "dist", "_buildtile"))
    return root


def env() -> dict[str, str]:
    """Child builds run this checkout of buildtile (a cached job reports its line too)."""
    paths = (str(REPO_ROOT), os.environ.get("PYTHONPATH"))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def progress_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith(("*** buildtile", "["))]


def test_the_backend_reports_each_stage_on_stderr(project, tmp_path):
    # as a frontend calls the hook: in the project folder, in a fresh interpreter
    hook = f"import buildtile.build as b; print(b.build_wheel({str(tmp_path / 'dist')!r}))"
    run = subprocess.run([sys.executable, "-c", hook], cwd=project, capture_output=True, text=True, env=env(), check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith(".whl")
    lines = progress_lines(run.stderr)
    assert lines[0].startswith("*** buildtile ") and lines[0].endswith("compiling the kernels of tiny_kernels")
    jobs = [line for line in lines if line.startswith("[")]
    assert [line.split("]")[0] for line in jobs] == ["[1/2", "[2/2"]
    assert {line.split(" -> ")[1].split()[0] for line in jobs} == {"sm_80", "sm_90"}
    assert lines[-1].startswith("*** buildtile: compiled 1 kernel for sm_80, sm_90 in ")
    assert lines.index(jobs[0]) > 0 and lines.index(jobs[-1]) < len(lines) - 1


def test_pip_verbose_shows_the_progress(project, tmp_path):
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
                          "--no-index", "-w", str(tmp_path / "wheels"), str(project)],
                         capture_output=True, text=True, env=env(), check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = progress_lines(run.stdout + run.stderr)
    assert any(line.endswith("compiling the kernels of tiny_kernels") for line in lines), run.stdout
    assert any(line.startswith("*** buildtile: compiled 1 kernel") for line in lines), run.stdout
