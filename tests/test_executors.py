"""The executor setting: checked like every other, the local pool by default, and a cluster that cannot
be reached either falls back to this machine with one warning line or, in strict mode, stops the build."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from buildtile.compiler import compile_project
from buildtile.config import load_project, read_settings
from buildtile.errors import BuildtileError, ConfigError
from buildtile.executors import open_executor
from buildtile.executors.local import LocalExecutor

FIXTURE = Path(__file__).parent / "fixtures" / "vecadd_project"


def free_port() -> int:
    """A port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("build", "_buildtile"))
    monkeypatch.setenv("BUILDTILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BUILDTILE_JOBS", "1")
    # what a scheduler that does not answer costs each test
    monkeypatch.setattr("buildtile.executors.dask.CONNECT_SECONDS", 0.5)
    return root


@pytest.mark.parametrize("value, expected", [
    ("ray://head:10001", 'must be "local" or "dask://HOST:PORT"'),
    ("dask://scheduler", "names no scheduler"),
    ("dask://:8786", "names no scheduler"),
    ("dask://scheduler:99999", "names no scheduler"),
])
def test_a_bad_executor_is_refused_naming_the_key(value, expected):
    with pytest.raises(ConfigError) as info:
        read_settings({"kernels": ["pkg.ops"], "executor": value}, "pyproject.toml", env={})
    assert "tool.buildtile.executor" in str(info.value) and expected in str(info.value)


def test_the_local_pool_is_the_default_and_dask_comes_from_the_environment():
    assert read_settings({"kernels": ["pkg.ops"]}, "p", env={}).executor == "local"
    settings = read_settings({"kernels": ["pkg.ops"]}, "p", env={"BUILDTILE_EXECUTOR": "dask://sched:8786",
                                                                 "BUILDTILE_EXECUTOR_STRICT": "1"})
    assert (settings.executor, settings.executor_strict) == ("dask://sched:8786", True)
    assert isinstance(open_executor("local", workers=2, strict=True, warn=print), LocalExecutor)


def test_an_unreachable_scheduler_falls_back_to_this_machine_with_one_warning(project, tmp_path, monkeypatch):
    address = f"dask://127.0.0.1:{free_port()}"
    monkeypatch.setenv("BUILDTILE_EXECUTOR", address)
    lines: list[str] = []
    manifest = compile_project(load_project(project), tmp_path / "out", log=lines.append)
    warnings = [line for line in lines if line.startswith("warning:")]
    assert len(warnings) == 1 and address in warnings[0] and "compiling on this machine" in warnings[0]
    assert len(lines) == 1 + 2 and all(".vecadd -> sm_" in line for line in lines[1:])   # both targets built
    assert len(list((tmp_path / "out").rglob("*.cubin"))) == 2 and manifest["kernels"]


def test_strict_mode_makes_an_unreachable_scheduler_bt0040(project, tmp_path, monkeypatch):
    monkeypatch.setenv("BUILDTILE_EXECUTOR", f"dask://127.0.0.1:{free_port()}")
    monkeypatch.setenv("BUILDTILE_EXECUTOR_STRICT", "true")
    lines: list[str] = []
    with pytest.raises(BuildtileError) as info:
        compile_project(load_project(project), tmp_path / "out", log=lines.append)
    assert info.value.code == "BT0040" and str(info.value).startswith("error[BT0040]: executor 'dask://127.0.0.1:")
    assert "executor-strict" in str(info.value)
    assert lines == [] and not (tmp_path / "out" / "tiny_kernels").exists()   # nothing compiled, nothing written
