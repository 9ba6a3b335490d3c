"""benchmarks/bench_torch_ops.py without a GPU: ``--host-only`` builds its package, reaches the
launch through each row, reports each op against its direct call and leaves the runtime as it
found it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))

import bench_torch_ops  # noqa: E402

from buildtile.runtime import driver as driver_module  # noqa: E402
from buildtile.runtime.arrays import TORCH_READER, inline_reader  # noqa: E402


def test_the_host_only_run_times_every_row_and_gives_the_runtime_back(capsys):
    before = driver_module.current
    assert bench_torch_ops.main(["--host-only", "--rounds", "2", "--launches", "3"]) == 0
    out = capsys.readouterr().out
    for row in ("direct", "torch op", "torch op .default", "tile direct", "tile op"):
        assert f"\n{row} " in out
    assert "torch op: " in out and "tile op: " in out
    assert driver_module.current is before
    assert inline_reader(torch.Tensor) is TORCH_READER
