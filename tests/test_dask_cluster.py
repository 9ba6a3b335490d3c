"""example_project built through a real Dask cluster (a LocalCluster of two worker processes): the wheel
is byte-identical to one built on this machine, and a worker killed mid-build costs nothing but time.

The project is built for one target with the C ABI off, to keep the file within its share of the
suite's time; each build on the cluster compiles every job (the cache is off), the local one may
take its images from the session's kernel cache (compiled on this machine by an earlier build).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import signal
import zipfile
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

from buildtile.compiler import compile_project   # noqa: E402
from buildtile.config import load_project         # noqa: E402

ROOT = Path(__file__).parent.parent
TARGET = "sm_90"


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:   # the build must bring its own
        yield cluster, client


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "example_project"
    shutil.copytree(ROOT / "example_project", root, ignore=shutil.ignore_patterns("build", "_buildtile"))
    for name, value in {"SOURCE_DATE_EPOCH": "1700000000", "BUILDTILE_CACHE_DIR": "off",
                        "BUILDTILE_TARGETS": TARGET, "BUILDTILE_C_ABI_ENABLED": "0", "BUILDTILE_JAX_FFI": "0",
                        "BUILDTILE_EXECUTOR_STRICT": "1"}.items():
        monkeypatch.setenv(name, value)
    return root


@pytest.fixture(scope="module")
def local_wheel(tmp_path_factory) -> bytes:
    """example_project's wheel built on this machine: what the cluster's must equal, byte for byte."""
    work = tmp_path_factory.mktemp("local")
    with pytest.MonkeyPatch.context() as mp:
        root = work / "example_project"
        shutil.copytree(ROOT / "example_project", root, ignore=shutil.ignore_patterns("build", "_buildtile"))
        for name, value in {"SOURCE_DATE_EPOCH": "1700000000", "BUILDTILE_TARGETS": TARGET,
                            "BUILDTILE_C_ABI_ENABLED": "0", "BUILDTILE_JAX_FFI": "0"}.items():
            mp.setenv(name, value)
        return build_wheel(root, work / "dist", mp)


def build_wheel(root: Path, dist: Path, monkeypatch) -> bytes:
    from buildtile import build

    monkeypatch.chdir(root)
    name = build.build_wheel(str(dist))
    return (dist / name).read_bytes()


def cubins_of(wheel: bytes, tmp_path: Path) -> dict[str, bytes]:
    path = tmp_path / "w.whl"
    path.write_bytes(wheel)
    with zipfile.ZipFile(path) as archive:
        return {Path(n).name: archive.read(n) for n in archive.namelist() if n.endswith(".cubin")}


def test_example_project_wheel_built_on_the_cluster_is_byte_identical(cluster, project, local_wheel, tmp_path,
                                                                        monkeypatch):
    local_cluster, client = cluster
    monkeypatch.setenv("BUILDTILE_EXECUTOR", "dask://" + local_cluster.scheduler_address.removeprefix("tcp://"))
    with distributed.get_task_stream(client) as stream:
        wheel = build_wheel(project, tmp_path / "dist", monkeypatch)
    ran = [task for task in stream.data if task["key"].startswith("buildtile-compile-")]
    cubins = cubins_of(wheel, tmp_path)
    assert len(ran) == len(cubins) > 10                          # every job ran on the cluster ...
    assert len({task["worker"] for task in ran}) == 2            # ... on both of its workers
    assert hashlib.sha256(wheel).hexdigest() == hashlib.sha256(local_wheel).hexdigest()


def test_a_worker_killed_mid_build_is_replaced_and_the_build_succeeds(cluster, project, local_wheel, tmp_path,
                                                                      monkeypatch):
    local_cluster, client = cluster
    monkeypatch.setenv("BUILDTILE_EXECUTOR", "dask://" + local_cluster.scheduler_address.removeprefix("tcp://"))
    monkeypatch.setenv("BUILDTILE_KERNELS", "example_kernels.ops;example_kernels.memory")   # 13 jobs: enough
    pids = client.run(os.getpid)
    killed: list[tuple[int, int]] = []   # (pid, jobs reported when it was killed)
    lines: list[str] = []

    def log(line: str) -> None:
        lines.append(line)
        if not killed:
            # the worker busy with the most jobs right now: those must run again on the other one
            busy = max(client.processing().items(), key=lambda item: len(item[1]))
            assert busy[1], "no worker was compiling anything"
            os.kill(pids[busy[0]], signal.SIGKILL)
            killed.append((pids[busy[0]], len(lines)))

    compile_project(load_project(project), tmp_path / "out", log=log)
    (pid, reported), = killed
    assert reported < len(lines)                                   # the kill came mid-build
    assert pid not in client.run(os.getpid).values()               # that process is gone
    built = {p.name: p.read_bytes() for p in (tmp_path / "out").rglob("*.cubin")}
    reference = cubins_of(local_wheel, tmp_path)
    assert len(built) == len(lines) > 10                           # every job, each as a local build makes it
    assert built == {name: reference[name] for name in built}
