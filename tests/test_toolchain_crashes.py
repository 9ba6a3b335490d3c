"""LLVM aborting on a job is a diagnostic naming the kernel and the target, never a dead build."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from buildtile.backends.simt.backend import SimtBackend
from buildtile.cli import main
from buildtile.compiler import compile_project
from buildtile.config import load_project
from buildtile.errors import ToolchainError
from buildtile.isolation import Died, Raised, Returned, run_isolated
from buildtile.jobs import Job, compile_job, run_jobs

FIXTURE = Path(__file__).parent / "fixtures" / "vecadd_project"

_HEADER = 'target triple = "nvptx64-nvidia-cuda"\ntarget datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"\n'
#: a kernel that stores one value: every target compiles it
GOOD_IR = _HEADER + """
define void @k(ptr addrspace(1) %p) {
  store i32 1, ptr addrspace(1) %p
  ret void
}
!nvvm.annotations = !{!0}
!0 = !{ptr @k, !"kernel", i32 1}
"""
#: NVPTX has no fp128 division: LLVM reports a fatal error and aborts its process
FATAL_IR = _HEADER + """
define void @k(ptr addrspace(1) %p) {
  %a = load fp128, ptr addrspace(1) %p
  %b = fdiv fp128 %a, %a
  store fp128 %b, ptr addrspace(1) %p
  ret void
}
"""
LLVM_SAYS = "LLVM ERROR: unsupported library call operation"


class MemoryCache:
    def __init__(self) -> None:
        self.entries: dict[str, dict[str, bytes]] = {}

    def get(self, key: str) -> dict[str, bytes] | None:
        return self.entries.get(key)

    def put(self, key: str, files: dict[str, bytes]) -> None:
        self.entries[key] = files


def jobs_with_one_fatal() -> list[Job]:
    jobs = [Job(f"pkg.ops.good{i} -> sm_80", "sm_80", f"good{i}", GOOD_IR) for i in range(5)]
    jobs.insert(2, Job("pkg.ops.fatal -> sm_90", "sm_90", "fatal", FATAL_IR))
    return jobs


@pytest.mark.parametrize("workers", [1, 4], ids=["one-job-at-a-time", "four-at-once"])
def test_an_llvm_abort_names_the_kernel_and_target_and_quotes_llvm(workers):
    cache, reported = MemoryCache(), []
    with pytest.raises(ToolchainError) as info:
        run_jobs(jobs_with_one_fatal(), cache, 3, workers, lambda job, done, total: reported.append(job.label))
    message = str(info.value)
    assert info.value.code == "BT0020"
    assert "kernel `pkg.ops.fatal` for sm_90" in message
    assert "SIGABRT" in message and LLVM_SAYS in message
    assert "please report it" in message
    # the other jobs finished, in order, and were cached with what an in-process compile gives
    assert reported == [f"pkg.ops.good{i} -> sm_80" for i in range(5)]
    assert set(cache.entries) == {f"good{i}" for i in range(5)}
    alone = Job("pkg.ops.good0 -> sm_80", "sm_80", "good0", GOOD_IR)
    ptx, cubin, _ = compile_job(alone, 3)
    assert cache.entries["good0"] == {"ptx": ptx.encode(), "cubin": cubin}


def test_a_single_uncached_job_is_isolated_too():
    with pytest.raises(ToolchainError) as info:
        run_jobs([Job("pkg.ops.fatal -> sm_80", "sm_80", "fatal", FATAL_IR)], MemoryCache(), 2, 0,
                 lambda *_: None)
    assert "kernel `pkg.ops.fatal` for sm_80" in str(info.value) and LLVM_SAYS in str(info.value)


def test_cached_jobs_never_start_a_process():
    cache = MemoryCache()
    cache.put("fatal", {"ptx": b"cached ptx", "cubin": b"cached cubin"})
    (job,) = jobs = [Job("pkg.ops.fatal -> sm_80", "sm_80", "fatal", FATAL_IR)]
    run_jobs(jobs, cache, 3, 1, lambda *_: None)
    assert (job.ptx, job.cubin, job.cached) == ("cached ptx", b"cached cubin", True)


def test_an_error_a_job_raises_is_raised_as_it_is():
    job = Job("pkg.ops.k -> sm_80", "sm_80", "k", "define void @k( {")
    with pytest.raises(ToolchainError, match="LLVM rejected the generated IR"):
        run_jobs([job], MemoryCache(), 3, 1, lambda *_: None)


def test_isolated_calls_return_raise_or_die_each_on_its_own():
    def abort():
        os.write(2, b"about to abort\n")
        os.abort()

    def fail():
        raise KeyError("no such thing")

    outcomes = dict(run_isolated([lambda: 41 + 1, abort, fail, lambda: b"x" * 1_000_000], workers=2))
    assert outcomes[0] == Returned(42)
    assert outcomes[1] == Died("was killed by SIGABRT", "about to abort\n")
    assert isinstance(outcomes[2], Raised) and outcomes[2].error.args == ("no such thing",)
    assert outcomes[3] == Returned(b"x" * 1_000_000)   # more than a pipe holds at once


@pytest.fixture
def fatal_scale_project(tmp_path, monkeypatch):
    """The vecadd fixture project whose one kernel lowers, for sm_90 only, to IR that LLVM aborts on."""
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("build", "_buildtile"))
    monkeypatch.setenv("BUILDTILE_CACHE_DIR", str(tmp_path / "cache"))
    real_llvm_ir = SimtBackend.llvm_ir
    monkeypatch.setattr(SimtBackend, "llvm_ir", lambda self, kernel, options: FATAL_IR)
    return root, real_llvm_ir


@pytest.mark.parametrize("jobs", ["1", "4"])
def test_a_build_whose_kernel_aborts_llvm_reports_it_and_writes_nothing(fatal_scale_project, tmp_path,
                                                                        monkeypatch, jobs):
    root, _ = fatal_scale_project
    monkeypatch.setenv("BUILDTILE_JOBS", jobs)
    with pytest.raises(ToolchainError) as info:
        compile_project(load_project(root), tmp_path / "out", log=lambda line: None)
    message = str(info.value)
    assert "kernel `tiny_kernels.ops.vecadd` for sm_80" in message and "for sm_90" in message
    assert LLVM_SAYS in message
    assert list((tmp_path / "out").iterdir()) == []   # no package, no staging folder left


def test_the_command_line_prints_the_diagnostic_not_a_traceback(fatal_scale_project, capsys):
    root, _ = fatal_scale_project
    assert main(["build", str(root)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error[BT0020]: the toolchain crashed compiling kernel `tiny_kernels.ops.vecadd`")
    assert "Traceback" not in err and LLVM_SAYS in err


def test_a_compile_error_raised_in_a_worker_keeps_its_diagnostics():
    from buildtile.diagnostics import Diagnostic, Span
    from buildtile.errors import CompileError

    diagnostic = Diagnostic("BT0600", "needs sm_80", Span("pkg/ops.py", 3, 4, 9, "    x = y"), help="drop sm_75")

    def refuse():
        raise CompileError([diagnostic])

    ((_, outcome),) = run_isolated([refuse], 1)
    assert isinstance(outcome, Raised) and isinstance(outcome.error, CompileError)
    assert outcome.error.diagnostics == [diagnostic] and outcome.error.code == "BT0600"
    assert str(outcome.error) == str(CompileError([diagnostic]))
