"""``checks = "debug"`` on a real GPU: an out-of-range read is caught on the device and raised
as BoundsError at the next synchronisation, naming the kernel and the source line; a release
build of the same kernel carries no check and reports nothing.

Each test builds a tiny project with buildtile's compiler into a temporary folder (for the
GPU at hand) and imports it. Skipped without a GPU or without PyTorch.
"""

from __future__ import annotations

import importlib
import itertools
import json
import sys

import numpy as np
import pytest

from buildtile.errors import BoundsError

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

KERNELS = '''\
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256, requires=["len(a) == len(c)"])
def shift(a: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(c):
        c[i] = a[i + 1]


@simt.kernel(block=256, requires=["len(a) == len(c)"])
def shift_guarded(a: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    if i + 1 < len(a):
        c[i] = a[i + 1]
'''
READ_LINE, READ_COL = 9, 16   # where `a[i + 1]` of `shift` is

_ids = itertools.count()


@pytest.fixture
def build(tmp_path, monkeypatch):
    """``build(checks)``: compile KERNELS with ``checks`` for this GPU and import the module."""
    from buildtile.compiler import compile_project
    from buildtile.config import load_project
    from buildtile.runtime.package import forget_package

    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    major, minor = torch.cuda.get_device_capability(0)
    made = []

    def make(checks: str):
        package = f"btbounds_{checks}_{next(_ids)}"
        root = tmp_path / package
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
        (root / package / "ops.py").write_text(KERNELS)
        (root / "pyproject.toml").write_text(
            f'[project]\nname = "{package}"\nversion = "0.1.0"\n\n[tool.buildtile]\n'
            f'kernels = ["{package}.ops"]\ntargets = ["sm_{major}{minor}"]\nptx = false\n'
            f'checks = "{checks}"\ncache-dir = "off"\n')
        compile_project(load_project(root, env={}), root, log=lambda line: None)
        monkeypatch.syspath_prepend(str(root))
        made.append(package)
        ops = importlib.import_module(f"{package}.ops")
        ops.PACKAGE = package
        ops.MANIFEST = json.loads((root / package / "_buildtile" / "manifest.json").read_text())
        return ops

    yield make
    for package in made:
        forget_package(package)
        for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[name]


def _inputs(n: int):
    a = torch.arange(n, dtype=torch.float32, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    return a, c


def test_out_of_range_read_is_raised_at_synchronize_naming_the_line(build):
    from buildtile.runtime import synchronize

    ops = build("debug")
    n = 1000
    a, c = _inputs(n)
    ops.shift[ops.shift.grid_for(n)](a, c)   # the last thread reads a[1000]
    with pytest.raises(BoundsError) as info:
        synchronize()
    error = info.value
    assert error.code == "BT0601"
    assert error.message == (f"out-of-range read in kernel `shift` at {ops.PACKAGE}/ops.py:{READ_LINE}:{READ_COL} "
                             f"(`a[i + 1]`): index {n} is past the length {n} of `a`")
    assert f"{READ_LINE} |         c[i] = a[i + 1]" in str(error)
    got = c.cpu().numpy()
    np.testing.assert_array_equal(got[:-1], np.arange(1, n, dtype=np.float32))
    assert got[-1] == 0.0   # the out-of-range read gave 0
    synchronize()           # reported once


def test_a_report_stops_the_next_launch_before_it_is_queued(build):
    from buildtile.runtime import synchronize

    ops = build("debug")
    n = 4096
    a, c = _inputs(n)
    ops.shift[ops.shift.grid_for(n)](a, c)
    torch.cuda.synchronize()                 # PyTorch's synchronisation does not know of buildtile's records
    c.fill_(-1.0)
    torch.cuda.synchronize()
    with pytest.raises(BoundsError, match="kernel `shift`"):
        ops.shift_guarded[ops.shift_guarded.grid_for(n)](a, c)
    torch.cuda.synchronize()
    assert bool((c == -1.0).all())           # the refused launch never ran
    ops.shift_guarded[ops.shift_guarded.grid_for(n)](a, c)
    synchronize()                            # in range: nothing to report
    assert torch.equal(c[:-1], a[1:])


def test_debug_reads_in_range_report_nothing(build):
    from buildtile.runtime import DeviceArray, synchronize

    ops = build("debug")
    n = 100_003
    a, c = _inputs(n)
    for _ in range(3):
        ops.shift_guarded[ops.shift_guarded.grid_for(n)](a, c)
    synchronize()
    assert torch.equal(c[:-1], a[1:])
    host = np.arange(n, dtype=np.float32)
    da, dc = DeviceArray.from_numpy(host), DeviceArray.zeros(n)
    ops.shift_guarded[ops.shift_guarded.grid_for(n)](da, dc)
    np.testing.assert_array_equal(dc.to_numpy()[:-1], host[1:])


def test_device_array_copy_to_host_reports_too(build):
    from buildtile.runtime import DeviceArray

    ops = build("debug")
    n = 300
    a, c = DeviceArray.from_numpy(np.arange(n, dtype=np.float32)), DeviceArray.zeros(n)
    ops.shift[ops.shift.grid_for(n)](a, c)
    with pytest.raises(BoundsError, match=rf"index {n} is past the length {n} of `a`"):
        c.to_numpy()


def test_release_build_carries_no_check_and_reports_nothing(build):
    from buildtile.runtime import synchronize
    from buildtile.runtime.bounds import BOUNDS_GLOBAL

    ops = build("release")
    assert ops.MANIFEST["checks"] == "release"
    for record in ops.MANIFEST["kernels"]:
        assert "bounds_sites" not in record
        cubin = ops.shift.package.artifact_dir / next(iter(record["artifacts"].values()))["path"]
        assert BOUNDS_GLOBAL.encode() not in cubin.read_bytes()
    n = 1000
    a, c = _inputs(n)
    ops.shift[ops.shift.grid_for(n)](a, c)   # reads one element past `a`: unchecked in release
    synchronize()
    assert torch.equal(c[:-1], a[1:])
