"""`buildtile new NAME` makes a project (a SIMT and a Tile kernel) that builds at once and whose tests pass."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from buildtile.cli import main
from buildtile.errors import BuildtileError
from buildtile.scaffold import new_project

CUDA_INCLUDE = Path("/usr/local/cuda/include")


def test_new_project_checks_builds_and_passes_its_own_tests(tmp_path, monkeypatch):
    assert main(["new", "demo-kernels", "--dir", str(tmp_path)]) == 0
    root = tmp_path / "demo-kernels"
    assert main(["check", str(root)]) == 0

    from buildtile import build

    monkeypatch.chdir(root)
    wheel_name = build.build_wheel(str(tmp_path / "dist"))
    site = tmp_path / "site"
    with zipfile.ZipFile(tmp_path / "dist" / wheel_name) as wheel:
        names = wheel.namelist()
        wheel.extractall(site)
    assert "demo_kernels/kernels.py" in names
    assert any(n.endswith("libdemo_kernels_kernels.so") for n in names)

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(root / "tests")],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout   # the CPU test; the GPU ones skip here

    cmake_dir = subprocess.run([sys.executable, "-m", "demo_kernels", "--cmake-dir"], capture_output=True,
                               text=True, env=env, cwd=tmp_path, check=True).stdout.strip()
    assert (Path(cmake_dir) / "demo_kernelsConfig.cmake").is_file()
    if (CUDA_INCLUDE / "cuda_runtime.h").is_file() and shutil.which("g++"):
        include = Path(cmake_dir).parent / "include"
        subprocess.run(["g++", "-std=c++17", "-fsyntax-only", f"-I{include}", f"-I{CUDA_INCLUDE}",
                        str(root / "cpp" / "main.cpp")], check=True)


def test_new_refuses_bad_names_and_existing_folders(tmp_path):
    with pytest.raises(BuildtileError, match="not a usable project name"):
        new_project("9lives", tmp_path)
    with pytest.raises(BuildtileError, match="Python keyword"):
        new_project("class", tmp_path)
    new_project("twice", tmp_path)
    with pytest.raises(BuildtileError, match="already exists"):
        new_project("twice", tmp_path)
