"""The kernel mutator (tests/fuzz/kernels.py): mutants of the example kernels and the must-pass
corpus through ``buildtile check`` and the compile, in a worker process.

``FUZZ_KERNEL_CASES`` (default 50) and ``FUZZ_SEED`` (default 0) size a run; scripts/fuzz.py runs
long ones. Every internal error the fuzzer found is fixed and pinned by a regression kernel
below; a new finding fails the run until it is fixed and pinned the same way (an
``xfail(strict=True)`` kernel and a :data:`KNOWN` pattern while a fix is pending).
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fuzz.kernels import CORPUS, Worker, mutate, run_cases

sys.path.insert(0, str(Path(__file__).parent / "fuzz"))
from kernel_worker import run_case  # noqa: E402

CASES = int(os.environ.get("FUZZ_KERNEL_CASES", "50"))
SEED = int(os.environ.get("FUZZ_SEED", "0"))

#: internal error pattern -> the regression kernel that pins it, for findings whose fix is pending (none now)
KNOWN: dict[str, str] = {}

HEAD = "from buildtile import simt\nfrom buildtile.types import DisjointSlice, Slice, f16, f32, i32\n\n\n"

#: kernels the fuzzer found ending in an internal error; each now checks or is refused with BT codes
REGRESSIONS = {
    "float_shift": """
        @simt.kernel(block=256)
        def k(y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = -1.5 << 2
        """,
    "float_shift_module_constant": """
        N = 1.5 << 2


        @simt.kernel(block=256)
        def k(y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = N
        """,
    "tile_float_shift_constant": """
        from buildtile import tile
        from buildtile.types import Tensor


        @tile.kernel
        def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
            z.store(tile.load_like(x, z) + (2.0 ^ 1.0))
        """,
    "float_bitwise_constant": """
        @simt.kernel(block=256)
        def k(y: DisjointSlice[i32]):
            i = simt.index_1d()
            y[i] = 3 & 1.5
        """,
    "negative_constant_shift": """
        @simt.kernel(block=256)
        def k(y: DisjointSlice[i32]):
            i = simt.index_1d()
            y[i] = 1 << -3
        """,
    "f16_overflow": """
        @simt.kernel(block=256)
        def k(y: DisjointSlice[f16]):
            i = simt.index_1d()
            y[i] = f16(1e6)
        """,
    "deep_sum": """
        @simt.kernel(block=256)
        def k(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = """ + " + ".join(["x[i]"] * 600) + "\n",
}


def test_the_mutator_is_seeded_and_changes_the_corpus():
    source = CORPUS[0].read_text()
    first = [mutate(source, random.Random(5)) for _ in range(3)]
    assert first == [mutate(source, random.Random(5)) for _ in range(3)]
    assert any(m is not None and m != source for m in first)


def test_every_mutant_checks_and_compiles_or_is_refused_with_bt_codes(capsys):
    report = run_cases(CASES, SEED)
    with capsys.disabled():
        print(f"\nkernel fuzzer: {report.cases} cases: {dict(report.outcomes)}; "
              f"{len(report.internal)} distinct internal errors")
        for issue in report.internal:
            print(f"  {issue}")
    assert report.cases == CASES and report.outcomes["ok"] + report.outcomes["refused"] > 0
    unknown = {i: src for i, (src, _) in report.internal.items() if not any(re.search(p, i) for p in KNOWN)}
    assert not unknown, "\n\n".join(f"{i}\n{src}" for i, src in unknown.items())


def test_a_dead_worker_is_reported_as_a_crash_and_replaced(monkeypatch):
    worker = Worker()
    start = Worker._start
    monkeypatch.setattr(worker, "_start", lambda: subprocess.Popen(
        [sys.executable, "-c", "import os; os.abort()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    try:
        outcome = worker.run(HEAD, "aborts")
        assert outcome.kind == "crash" and outcome.is_internal and worker.proc is None
        monkeypatch.setattr(worker, "_start", lambda: start(worker))
        source = HEAD + "@simt.kernel(block=32)\ndef k(y: DisjointSlice[f32]):\n    y[simt.index_1d()] = 1.0\n"
        assert worker.run(source, "fine").kind == "ok"
    finally:
        worker.close()


def test_every_known_error_names_a_regression_kernel():
    assert set(KNOWN.values()) <= set(REGRESSIONS)


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regression_kernel_checks_or_is_refused_with_bt_codes(name, tmp_path):
    outcome = run_case(HEAD + textwrap.dedent(REGRESSIONS[name]).lstrip("\n"), "regression", tmp_path)
    assert outcome["kind"] in ("ok", "refused"), outcome
