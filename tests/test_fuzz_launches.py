"""The launch mutator (tests/fuzz/launches.py) against the fake driver, both launch paths.

``FUZZ_CASES`` (default 150 per launch path) and ``FUZZ_SEED`` (default 0) size a run;
scripts/fuzz.py runs long ones. Every issue the fuzzer found is fixed and pinned by a
regression case below; a new finding fails the run until it is fixed and pinned the same way
(an ``xfail(strict=True)`` case and a :data:`KNOWN` pattern while a fix is pending).
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

#: issue pattern -> the regression case that pins it, for findings whose fix is pending (none now)
KNOWN: dict[str, str] = {}



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


def test_an_array_of_negative_extent_is_refused(ops, fake_gpu):
    out = fake_gpu.array((30, 30, 3), "f64")
    refused_before_anything_is_queued(fake_gpu, lambda: ops.volume[(1, 4, 10)](
        FakeCudaArray(out.ptr, (-1, 30, 3), "<f8")))


def test_an_array_whose_bytes_overflow_the_address_space_is_refused(ops, fake_gpu):
    out = fake_gpu.array(16, "f32")
    refused_before_anything_is_queued(fake_gpu, lambda: ops.scalars[(1,)](
        False, 1.5, 2.5, 1.0, 78, FakeCudaArray(out.ptr, (2**62,), "<f4")))


def test_a_pointer_misaligned_for_its_element_is_refused(ops, fake_gpu):
    out = fake_gpu.array(1290, "f32")
    refused_before_anything_is_queued(fake_gpu, lambda: ops.scalars[(6,)](
        True, 2.5, 3.5, 0.5, 63, FakeCudaArray(out.ptr + 3, (1289,), "<f4")))


@pytest.mark.parametrize("grid", [b"\x01", range(2, 4), 2.0, True, np.bool_(True)],
                         ids=["bytes", "range", "float", "bool", "np.bool_"])
def test_a_grid_of_bytes_range_float_or_bool_is_refused(ops, fake_gpu, grid):
    a, b, c = (fake_gpu.array((29, 6)) for _ in range(3))
    refused_before_anything_is_queued(fake_gpu, lambda: ops.matadd[grid](a, b, c))


@pytest.mark.parametrize("grid", [np.int64(4), np.int32(4), (np.int64(4), 1)], ids=["np.int64", "np.int32", "tuple"])
def test_a_grid_of_numpy_ints_launches_as_ints_do(ops, fake_gpu, grid):
    a, b, c = (fake_gpu.array((29, 6)) for _ in range(3))
    queued = len(fake_gpu.queued)
    ops.matadd[grid](a, b, c)
    ops.matadd[4](a, b, c)
    assert len(fake_gpu.queued) == queued + 2
    assert fake_gpu.launches[-2].grid == fake_gpu.launches[-1].grid


def test_a_keyword_argument_is_refused_with_a_bt_code(ops, fake_gpu):
    v = fake_gpu.array((37, 16, 3), "f64")
    refused_before_anything_is_queued(fake_gpu, lambda: ops.volume[(1, 2, 10)](v, stream2=0))


def test_a_stream_handle_past_64_bits_is_refused(ops, fake_gpu):
    coeffs, x, y = fake_gpu.array(2, "f64"), fake_gpu.array(67, "f64"), fake_gpu.array(67, "f64")
    refused_before_anything_is_queued(fake_gpu, lambda: ops.polyval_abs[(1,)](coeffs, x, y, stream=2**70))
