"""Cooperative kernels through the C shim, on tests/fake_libcuda.c: a grid the device cannot
hold resident is refused with the contract status before anything is queued; one that fits
goes through cuLaunchCooperativeKernel, and other kernels still through cuLaunchKernel."""

from __future__ import annotations

import ctypes
import shutil

import c_abi_support as support
import pytest
from test_c_abi import CC, HERE, WARNINGS, FakeState, Shim, config, run, tensor

from buildtile.config import BuildtileSettings
from buildtile.interop.c_abi import emit

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
    root = tmp_path_factory.mktemp("cooppkg")
    manifest = support.write_package(root, support.example_kernels() + [cooperative_kernel()])
    project = emit(manifest, root / PKG / "_buildtile", root / "build", BuildtileSettings()).cmake_source_dir
    shim = project.parent / "libshim.so"
    run([CC, "-std=c11", *WARNINGS, "-Wpedantic", "-O1", "-fPIC", "-shared", "-fvisibility=hidden",
         "-I", project / "include", "-I", project / "src",
         *sorted((project / "src").glob("*.c")), "-o", shim, "-ldl", "-lpthread"])
    driver = root / "fake" / "libcuda.so.1"
    driver.parent.mkdir()
    run([CC, "-std=c11", *WARNINGS, "-fPIC", "-shared", HERE / "fake_libcuda.c", "-o", driver])
    return manifest, project, shim, driver


@pytest.fixture
def fake(built, tmp_path, monkeypatch):
    manifest, _, shim_path, driver_path = built
    monkeypatch.setenv("BUILDTILE_LIBCUDA", str(driver_path))
    driver = ctypes.CDLL(str(driver_path))
    state = CooperativeFakeState.in_dll(driver, "fake")
    state.cc_major, state.cc_minor, state.device_count = 9, 0, 1
    state.init_result = state.refuse_cubin = state.refuse_ptx = 0
    state.multiprocessors, state.blocks_per_sm = 4, 2
    driver.fake_reset_observations()
    driver.fake_make_current(0, 1)
    copy = tmp_path / "libshim.so"
    shutil.copy(shim_path, copy)
    return Shim(copy, manifest), state


def histogram_args(n=1000, bins=64):
    return (tensor(VALUES, [n], "i32"), tensor(COUNTS, [bins], "u32"), tensor(FREQ, [bins], "f32"))


def test_the_kernel_record_of_the_shim_says_cooperative(built):
    _, project, _, _ = built
    source = "\n".join(p.read_text() for p in sorted((project / "src").glob("*.c")))
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
