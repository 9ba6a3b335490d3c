"""The launch mutator (tests/fuzz/launches.py) against the fake driver, both launch paths.

``FUZZ_CASES`` (default 150 per launch path) and ``FUZZ_SEED`` (default 0) size a run;
scripts/fuzz.py runs long ones. Every issue found must be a known one, each pinned by an
``xfail(strict=True)`` regression case below: when a fix lands, its case passes, fails as
XPASS, and its entry leaves :data:`KNOWN`.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from conftest import RUNTIME_KERNELS

from buildtile.errors import BuildtileError
from buildtile.runtime.testing import FakeCudaArray

from fuzz.launches import run_cases

CASES = int(os.environ.get("FUZZ_CASES", "150"))
SEED = int(os.environ.get("FUZZ_SEED", "0"))

#: issue pattern -> the regression case below that reproduces it
KNOWN: dict[str, str] = {
    r"^array: negative extent: launched": "test_an_array_of_negative_extent_is_refused",
    r"^array: huge extent: launched": "test_an_array_whose_bytes_overflow_the_address_space_is_refused",
    r"^array: misaligned: launched": "test_a_pointer_misaligned_for_its_element_is_refused",
    r"^grid: launched": "test_a_grid_of_numpy_ints_bytes_or_range_is_refused",
    r"^keyword: TypeError": "test_a_keyword_argument_is_refused_with_a_bt_code",
    r"^stream: (launched|OverflowError)": "test_a_stream_handle_past_64_bits_is_refused",
}

#: the fixes these wait for are being made in the runtime's launch checks
PENDING = pytest.mark.xfail(strict=True, reason="the launch checks do not refuse this yet")


def test_every_mutated_launch_launches_validly_or_is_refused_with_a_bt_code(ops, fake_gpu, capsys):
    report = run_cases(ops, fake_gpu, RUNTIME_KERNELS, CASES, SEED)
    with capsys.disabled():
        print(f"\nlaunch fuzzer: {report.cases} cases: {dict(report.outcomes)}; "
              f"{len(report.issues)} distinct issues")
        for issue in report.issues:
            print(f"  {issue}")
    unknown = {i: r for i, r in report.issues.items() if not any(re.search(p, i) for p in KNOWN)}
    assert not unknown, unknown


def test_every_known_issue_names_a_regression_case():
    assert set(KNOWN.values()) <= set(globals())


def refused_before_anything_is_queued(fake_gpu, launch) -> None:
    queued = len(fake_gpu.queued)
    with pytest.raises(BuildtileError) as info:
        launch()
    assert re.fullmatch(r"BT\d{4}", info.value.code) and len(fake_gpu.queued) == queued


@PENDING
def test_an_array_of_negative_extent_is_refused(ops, fake_gpu):
    out = fake_gpu.array((30, 30, 3), "f64")
    refused_before_anything_is_queued(fake_gpu, lambda: ops.volume[(1, 4, 10)](
        FakeCudaArray(out.ptr, (-1, 30, 3), "<f8")))


@PENDING
def test_an_array_whose_bytes_overflow_the_address_space_is_refused(ops, fake_gpu):
    out = fake_gpu.array(16, "f32")
    refused_before_anything_is_queued(fake_gpu, lambda: ops.scalars[(1,)](
        False, 1.5, 2.5, 1.0, 78, FakeCudaArray(out.ptr, (2**62,), "<f4")))


@PENDING
def test_a_pointer_misaligned_for_its_element_is_refused(ops, fake_gpu):
    out = fake_gpu.array(1290, "f32")
    refused_before_anything_is_queued(fake_gpu, lambda: ops.scalars[(6,)](
        True, 2.5, 3.5, 0.5, 63, FakeCudaArray(out.ptr + 3, (1289,), "<f4")))


@PENDING
@pytest.mark.parametrize("grid", [np.int64(4), b"\x01", range(2, 4)], ids=["np.int64", "bytes", "range"])
def test_a_grid_of_numpy_ints_bytes_or_range_is_refused(ops, fake_gpu, grid):
    a, b, c = (fake_gpu.array((29, 6)) for _ in range(3))
    refused_before_anything_is_queued(fake_gpu, lambda: ops.matadd[grid](a, b, c))


@PENDING
def test_a_keyword_argument_is_refused_with_a_bt_code(ops, fake_gpu):
    v = fake_gpu.array((37, 16, 3), "f64")
    refused_before_anything_is_queued(fake_gpu, lambda: ops.volume[(1, 2, 10)](v, stream2=0))


@PENDING
def test_a_stream_handle_past_64_bits_is_refused(ops, fake_gpu):
    coeffs, x, y = fake_gpu.array(2, "f64"), fake_gpu.array(67, "f64"), fake_gpu.array(67, "f64")
    refused_before_anything_is_queued(fake_gpu, lambda: ops.polyval_abs[(1,)](coeffs, x, y, stream=2**70))
