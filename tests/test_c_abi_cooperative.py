"""Cooperative kernels through the C shim, on tests/fake_libcuda.c: a grid the device cannot
hold resident is refused with the contract status before anything is queued; one that fits
goes through cuLaunchCooperativeKernel, and other kernels still through cuLaunchKernel."""

from __future__ import annotations

import ctypes

import c_abi_support as support
import pytest
from c_abi_support import CC, FakeState, config, tensor

pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")

PKG = support.PACKAGE
BT_ERR_CONTRACT_STATUS = 600
VALUES, COUNTS, FREQ = 0x7F00_0000_1000, 0x7F00_0010_0000, 0x7F00_0020_0000


class CooperativeFakeState(FakeState):
    """The fake libcuda's state with the fields laid out after the ones FakeState mirrors."""

    _fields_ = [("driver_version", ctypes.c_int), ("multiprocessors", ctypes.c_int),
                ("blocks_per_sm", ctypes.c_int), ("cooperative_launches", ctypes.c_int),
                ("occupancy_threads", ctypes.c_int)]


def cooperative_kernel() -> tuple[dict, str]:
    record = support._kernel(
        "normalized_histogram",
        [support._slice("values", dtype="i32"), support._slice("counts", "atomic_slice", dtype="u32"),
         support._slice("freq", "disjoint_slice", dtype="f32")],
        {**support._contract([256, 1, 1], 0, []), "cooperative": True},
        module="example_kernels.cooperative",
    )
    return record, support.VECADD_PTX


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return support.compiled_package(tmp_path_factory.mktemp("cooppkg"), support.example_kernels() + [cooperative_kernel()])


@pytest.fixture
def fake(built, tmp_path, monkeypatch):
    shim, driver, _ = support.fake_shim(built, tmp_path, monkeypatch)
    state = CooperativeFakeState.in_dll(driver, "fake")
    state.multiprocessors, state.blocks_per_sm = 4, 2
    return shim, state


def histogram_args(n=1000, bins=64):
    return (tensor(VALUES, [n], "i32"), tensor(COUNTS, [bins], "u32"), tensor(FREQ, [bins], "f32"))


def test_the_kernel_record_of_the_shim_says_cooperative(built):
    source = "\n".join(p.read_text() for p in sorted((built.project / "src").glob("*.c")))
    assert "bt_buffers_3, 3, 1," in source      # the cooperative kernel
    assert source.count(", 3, 0,") >= 2            # vecadd and matadd: three buffers, plain


def test_a_grid_that_fits_goes_through_the_cooperative_launch(fake):
    shim, state = fake
    assert shim.normalized_histogram(config(8), *histogram_args()) == 0, shim.last_error
    assert state.launches == 1 and state.cooperative_launches == 1
    assert list(state.grid) == [8, 1, 1] and list(state.block) == [256, 1, 1]
    assert state.occupancy_threads == 256


def test_a_grid_the_device_cannot_hold_resident_is_refused_before_the_launch(fake):
    shim, state = fake
    status = shim.normalized_histogram(config(9), *histogram_args())
    assert status == BT_ERR_CONTRACT_STATUS, shim.last_error
    message = shim.last_error
    assert "cooperative" in message and "at most 8 of its blocks" in message and "has 9" in message
    assert "grid-stride" in message
    assert state.launches == 0 and state.cooperative_launches == 0


def test_all_three_grid_axes_count(fake):
    shim, state = fake
    state.multiprocessors, state.blocks_per_sm = 3, 2
    assert shim.normalized_histogram(config(2, 2, 2), *histogram_args()) == BT_ERR_CONTRACT_STATUS
    assert shim.normalized_histogram(config(3, 2, 1), *histogram_args()) == 0, shim.last_error
    assert state.cooperative_launches == 1


def test_plain_kernels_still_launch_plainly(fake):
    shim, state = fake
    a, b, c = (tensor(addr, [1000]) for addr in (VALUES, COUNTS, FREQ))
    assert shim.vecadd(config(100), a, b, c) == 0, shim.last_error
    assert state.launches == 1 and state.cooperative_launches == 0
