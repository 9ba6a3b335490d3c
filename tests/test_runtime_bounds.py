"""Out-of-range reads of ``checks = "debug"`` builds, reported by the host (on a fake GPU).

The fake driver plays the device's part: ``report_out_of_range`` writes the
record exactly as a debug kernel does when its module's bounds global points
at one.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from buildtile.errors import BoundsError, BuildtileError
from buildtile.runtime import bounds, synchronize
from buildtile.runtime.launch import CheckedPreparedLaunch, PreparedLaunch

SOURCE = '''\
from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32


@simt.kernel(block=256)
def shift(a: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(c):
        c[i] = a[i + 1]


@simt.kernel(block=(16, 16))
def column(m: Tensor[f32, 2], out: DisjointTensor[f32, 2]):
    row, col = simt.index_2d()
    out[row, col] = m[row, col + 1]


@simt.kernel(block=256)
def fill(c: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(c):
        c[i] = 1.0
'''

KERNELS = {
    "shift": {"params": [("a", "slice", "f32"), ("c", "disjoint_slice", "f32")]},
    "column": {"params": [("m", "tensor", "f32", 2), ("out", "disjoint_tensor", "f32", 2)],
               "block": (16, 16, 1), "index_dims": 2},
    "fill": {"params": [("c", "disjoint_slice", "f32")]},
}

#: what the compiler records for the reads of SOURCE (col is 1-based)
SITES = {
    "shift": [{"param": "a", "line": 9, "col": 16, "text": "a[i + 1]"}],
    "column": [{"param": "m", "line": 15, "col": 21, "text": "m[row, col + 1]"}],
    "fill": [],
}


def _debug_package(make_kernel_package, fake_gpu, checks="debug"):
    ops = make_kernel_package(SOURCE, KERNELS)
    path = Path(ops.__file__).parent / "_buildtile" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["checks"] = checks
    package = ops.__name__.partition(".")[0]
    for record in manifest["kernels"]:
        if checks == "debug":
            record["bounds_sites"] = [dict(site, file=f"{package}/ops.py") for site in SITES[record["name"]]]
    path.write_text(json.dumps(manifest))
    ops.SYMBOLS = {record["name"]: record["symbol"] for record in manifest["kernels"]}
    ops.PACKAGE = package
    return ops


@pytest.fixture
def debug_ops(make_kernel_package, fake_gpu):
    return _debug_package(make_kernel_package, fake_gpu)


def _calls(fake_gpu, name):
    return [args for call, args in fake_gpu.calls if call == name]


# ----------------------------------------------------------------------------- release builds

def test_release_builds_allocate_nothing_and_launch_unchecked(make_kernel_package, fake_gpu):
    ops = _debug_package(make_kernel_package, fake_gpu, checks="release")
    ops.shift[1](fake_gpu.array(11), fake_gpu.array(10))
    synchronize()
    assert type(ops.shift[1]) is PreparedLaunch
    assert not _calls(fake_gpu, "host_alloc_mapped") and not _calls(fake_gpu, "module_global")
    assert not fake_gpu.report_out_of_range(ops.SYMBOLS["shift"], 0, 10, 10)  # reporting stays off


def test_debug_builds_launch_through_the_checked_path(debug_ops):
    assert type(debug_ops.shift[1]) is CheckedPreparedLaunch
    assert type(debug_ops.shift.prepare(grid=1)) is CheckedPreparedLaunch


# ----------------------------------------------------------------------------- module load

def test_loading_a_debug_module_points_its_global_at_a_zeroed_record(debug_ops, fake_gpu):
    debug_ops.shift[1](fake_gpu.array(11), fake_gpu.array(10))
    assert _calls(fake_gpu, "host_alloc_mapped") == [(0, bounds.PAGE_SIZE)]
    assert _calls(fake_gpu, "module_global") == [(bounds.BOUNDS_GLOBAL,)]
    (global_address, nbytes), = [(dst, n) for dst, n in _calls(fake_gpu, "memcpy_htod")]
    assert nbytes == 8
    record = int.from_bytes(fake_gpu.read(global_address, 8), "little")
    assert record and bytes(bounds.RECORD_SIZE) == __import__("ctypes").string_at(record, bounds.RECORD_SIZE)


def test_kernels_of_a_device_share_one_page_of_records(debug_ops, fake_gpu):
    debug_ops.shift[1](fake_gpu.array(11), fake_gpu.array(10))
    debug_ops.column[1, 1](fake_gpu.array((4, 5)), fake_gpu.array((4, 4)))
    assert len(_calls(fake_gpu, "host_alloc_mapped")) == 1
    assert len(_calls(fake_gpu, "module_global")) == 2


def test_a_kernel_that_reads_no_array_gets_no_record(debug_ops, fake_gpu):
    debug_ops.fill[1](fake_gpu.array(10))
    assert not _calls(fake_gpu, "module_global") and not _calls(fake_gpu, "host_alloc_mapped")


def test_the_global_name_is_the_compilers():
    from buildtile.backends.simt.lower import BOUNDS_GLOBAL

    assert bounds.BOUNDS_GLOBAL == BOUNDS_GLOBAL


# ----------------------------------------------------------------------------- reports

def test_out_of_range_read_is_raised_at_synchronize_naming_kernel_and_line(debug_ops, fake_gpu):
    debug_ops.shift[1](fake_gpu.array(10), fake_gpu.array(10))
    assert fake_gpu.report_out_of_range(debug_ops.SYMBOLS["shift"], site=0, index=10, extent=10)
    with pytest.raises(BoundsError) as info:
        synchronize()
    error = info.value
    assert error.code == "BT0601" and isinstance(error, BuildtileError)
    assert error.message == (f"out-of-range read in kernel `shift` at {debug_ops.PACKAGE}/ops.py:9:16 "
                             "(`a[i + 1]`): index 10 is past the length 10 of `a`")
    text = str(error)
    assert text.startswith("error[BT0601]: out-of-range read in kernel `shift`")
    assert "9 |         c[i] = a[i + 1]" in text
    assert "  |                ^^^^^^^^ index 10, length 10" in text
    assert "test the index against `len(a)`" in text
    report = error.report
    assert (report.kernel, report.param, report.line, report.index, report.extent, report.device) == \
        ("shift", "a", 9, 10, 10, 0)
    assert _calls(fake_gpu, "synchronize")


def test_a_report_is_raised_once(debug_ops, fake_gpu):
    debug_ops.shift[1](fake_gpu.array(10), fake_gpu.array(10))
    fake_gpu.report_out_of_range(debug_ops.SYMBOLS["shift"], 0, 10, 10)
    with pytest.raises(BoundsError):
        synchronize()
    synchronize()  # cleared: nothing more to say
    assert fake_gpu.report_out_of_range(debug_ops.SYMBOLS["shift"], 0, 12, 10)  # the record is free again
    with pytest.raises(BoundsError, match="index 12"):
        synchronize()


def test_the_first_report_wins(debug_ops, fake_gpu):
    debug_ops.shift[1](fake_gpu.array(10), fake_gpu.array(10))
    assert fake_gpu.report_out_of_range(debug_ops.SYMBOLS["shift"], 0, 10, 10)
    assert not fake_gpu.report_out_of_range(debug_ops.SYMBOLS["shift"], 0, 99, 10)
    with pytest.raises(BoundsError, match="index 10 is past"):
        synchronize()


def test_an_earlier_report_is_raised_before_the_next_launch_is_queued(debug_ops, fake_gpu):
    a, c = fake_gpu.array(10), fake_gpu.array(10)
    debug_ops.shift[1](a, c)
    fake_gpu.report_out_of_range(debug_ops.SYMBOLS["shift"], 0, 10, 10)
    with pytest.raises(BoundsError, match="kernel `shift`"):
        debug_ops.column[1, 1](fake_gpu.array((4, 5)), fake_gpu.array((4, 4)))  # any debug launch
    assert [launch.symbol for launch in fake_gpu.launches] == [debug_ops.SYMBOLS["shift"]]
    debug_ops.shift[1](a, c)  # reported: launches go on
    assert len(fake_gpu.launches) == 2


def test_a_report_is_raised_before_a_repeated_launch_too(debug_ops, fake_gpu):
    # arrays whose binder knows their device: with the compiled launch call, the repeats are
    # launched from C, and the report must still come first
    from buildtile.runtime import DeviceArray

    a, c = DeviceArray.zeros(10), DeviceArray.zeros(10)
    debug_ops.shift[1](a, c)
    debug_ops.shift[1](a, c)
    armed = getattr(debug_ops.shift[1], "_armed", lambda: False)()
    assert armed == (type(fake_gpu).__name__ == "CompiledLaunchFakeDriver")
    fake_gpu.report_out_of_range(debug_ops.SYMBOLS["shift"], 0, 10, 10)
    with pytest.raises(BoundsError, match="kernel `shift`"):
        debug_ops.shift[1](a, c)
    assert len(fake_gpu.launches) == 2
    debug_ops.shift[1](a, c)
    assert len(fake_gpu.launches) == 3


def test_tensor_reads_name_the_axis(debug_ops, fake_gpu):
    debug_ops.column[1, 1](fake_gpu.array((4, 5)), fake_gpu.array((4, 4)))
    fake_gpu.report_out_of_range(debug_ops.SYMBOLS["column"], 0, index=5, extent=5, axis=1)
    with pytest.raises(BoundsError) as info:
        synchronize()
    assert info.value.message.endswith("(`m[row, col + 1]`): index 5 is past the extent 5 of axis 1 of `m`")
    assert "test the index against `m.shape[1]`" in str(info.value)


def test_negative_index_is_reported_as_such(debug_ops, fake_gpu):
    debug_ops.shift[1](fake_gpu.array(10), fake_gpu.array(10))
    fake_gpu.report_out_of_range(debug_ops.SYMBOLS["shift"], 0, index=-1, extent=10)
    with pytest.raises(BoundsError, match=r"index -1 is before the start of `a` \(length 10\)"):
        synchronize()


def test_device_array_copy_to_host_reports(debug_ops, fake_gpu):
    from buildtile.runtime import DeviceArray

    a, c = DeviceArray.zeros(10), DeviceArray.zeros(10)
    debug_ops.shift[1](a, c)
    fake_gpu.report_out_of_range(debug_ops.SYMBOLS["shift"], 0, 10, 10)
    with pytest.raises(BoundsError):
        c.to_numpy()


def test_synchronize_on_a_stream_waits_for_that_stream(debug_ops, fake_gpu):
    debug_ops.shift[1](fake_gpu.array(10), fake_gpu.array(10), stream=0x5000)
    fake_gpu.report_out_of_range(debug_ops.SYMBOLS["shift"], 0, 10, 10)
    with pytest.raises(BoundsError):
        synchronize(stream=0x5000)
    assert _calls(fake_gpu, "stream_synchronize") == [(0x5000,)]


def test_a_site_the_manifest_does_not_list_is_still_reported(debug_ops, fake_gpu):
    debug_ops.shift[1](fake_gpu.array(10), fake_gpu.array(10))
    fake_gpu.report_out_of_range(debug_ops.SYMBOLS["shift"], site=7, index=3, extent=2)
    with pytest.raises(BoundsError, match=r"kernel `shift` at \?:0:0 \(`read #7`\): index 3 is past the length 2"):
        synchronize()


def test_records_made_through_a_replaced_driver_are_not_read(debug_ops, fake_gpu):
    from buildtile.runtime.testing import fake_driver

    debug_ops.shift[1](fake_gpu.array(10), fake_gpu.array(10))
    fake_gpu.report_out_of_range(debug_ops.SYMBOLS["shift"], 0, 10, 10)
    with fake_driver():
        synchronize()  # another driver: the record is not its to read
    with pytest.raises(BoundsError):
        synchronize()


# ----------------------------------------------------------------------------- with the real compiler

def test_a_compiled_debug_kernel_reports_the_line_of_its_read(tmp_path, monkeypatch, fake_gpu):
    """The compiler's manifest (sites) and module global, read by the runtime as they are."""
    from buildtile.compiler import compile_project
    from buildtile.config import load_project
    from buildtile.runtime.package import forget_package

    package = "btbounds_compiled"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "ops.py").write_text(SOURCE)
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\nname = "{package}"\nversion = "0.1.0"\n\n[tool.buildtile]\nkernels = ["{package}.ops"]\n'
        'targets = ["sm_90"]\nptx = false\nchecks = "debug"\ncache-dir = "off"\n')
    manifest = compile_project(load_project(tmp_path, env={}), tmp_path, log=lambda line: None)
    assert manifest["checks"] == "debug"
    records = {record["name"]: record for record in manifest["kernels"]}
    assert records["shift"]["bounds_sites"] == [dict(SITES["shift"][0], file=f"{package}/ops.py")]
    assert records["column"]["bounds_sites"] == [dict(SITES["column"][0], file=f"{package}/ops.py")]
    cubin = tmp_path / package / "_buildtile" / records["shift"]["artifacts"]["sm_90"]["path"]
    assert bounds.BOUNDS_GLOBAL.encode() in cubin.read_bytes()

    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        ops = importlib.import_module(f"{package}.ops")
        ops.shift[4](fake_gpu.array(1000), fake_gpu.array(1000))
        fake_gpu.report_out_of_range(records["shift"]["symbol"], 0, 1000, 1000)
        with pytest.raises(BoundsError) as info:
            synchronize()
        assert info.value.message == (f"out-of-range read in kernel `shift` at {package}/ops.py:9:16 "
                                      "(`a[i + 1]`): index 1000 is past the length 1000 of `a`")
        assert "9 |         c[i] = a[i + 1]" in str(info.value)
    finally:
        forget_package(package)
        for name in [m for m in list(sys.modules) if m == package or m.startswith(package + ".")]:
            del sys.modules[name]
