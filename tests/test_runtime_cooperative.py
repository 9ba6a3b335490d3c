"""Cooperative launches in the Python host, on a fake GPU: a grid the device cannot hold
resident is refused before anything is queued; others go through cuLaunchCooperativeKernel."""

from __future__ import annotations

import pytest

from buildtile.errors import ContractError

COOPERATIVE_KERNELS = {
    "normalize": dict(params=[("values", "slice", "i32"), ("counts", "atomic_slice", "u32"),
                              ("freq", "disjoint_slice", "f32")], block=(256, 1, 1), cooperative=True),
    "plain": dict(params=[("out", "disjoint_slice", "f32")]),
}
SOURCE = "from buildtile import simt\n\n" + "".join(
    f"@simt.kernel\ndef {name}({', '.join(p[0] for p in spec['params'])}):\n    pass\n\n\n"
    for name, spec in COOPERATIVE_KERNELS.items())


@pytest.fixture
def coop(make_kernel_package, fake_gpu):
    return make_kernel_package(SOURCE, COOPERATIVE_KERNELS)


def args(fake_gpu, n=1000, bins=64):
    return fake_gpu.array(n, "i32"), fake_gpu.array(bins, "u32"), fake_gpu.array(bins, "f32")


def test_a_grid_that_fits_launches_cooperatively(coop, fake_gpu):
    fits = fake_gpu.multiprocessors * fake_gpu.blocks_per_multiprocessor
    coop.normalize[fits](*args(fake_gpu))
    (launch,) = fake_gpu.launches
    assert launch.cooperative and launch.grid == (fits, 1, 1) and launch.block == (256, 1, 1)
    assert ("occupancy", (launch.symbol, 256, 0)) in fake_gpu.calls


def test_prepare_refuses_a_grid_the_device_cannot_hold_resident(coop, fake_gpu):
    fake_gpu.multiprocessors, fake_gpu.blocks_per_multiprocessor = 4, 2
    with pytest.raises(ContractError) as info:
        coop.normalize.prepare(grid=9)
    message = str(info.value)
    assert info.value.code == "BT0600"
    assert "cooperative" in message and "at most 8 of its blocks" in message and "has 9" in message
    assert "grid-stride" in info.value.help
    assert fake_gpu.queued == []
    coop.normalize.prepare(grid=8)(*args(fake_gpu))
    assert [launch.cooperative for launch in fake_gpu.launches] == [True]


def test_the_grid_counts_all_three_axes(coop, fake_gpu):
    fake_gpu.multiprocessors, fake_gpu.blocks_per_multiprocessor = 2, 3
    with pytest.raises(ContractError):
        coop.normalize.prepare(grid=(7,))
    assert coop.normalize.prepare(grid=6).grid == (6, 1, 1)


def test_repeated_launches_stay_cooperative(coop, fake_gpu):
    launch = coop.normalize[4]
    values = args(fake_gpu)
    for _ in range(3):
        launch(*values)
    assert [record.cooperative for record in fake_gpu.launches] == [True, True, True]


def test_unsafe_launch_of_a_cooperative_kernel_is_cooperative_and_checked(coop, fake_gpu):
    fake_gpu.multiprocessors, fake_gpu.blocks_per_multiprocessor = 1, 1
    with pytest.raises(ContractError):
        coop.normalize.unsafe_launch(2, 256, *args(fake_gpu))
    assert fake_gpu.queued == []
    coop.normalize.unsafe_launch(1, 256, *args(fake_gpu))
    assert fake_gpu.launches[-1].cooperative


def test_other_kernels_launch_plainly_without_asking_for_occupancy(coop, fake_gpu):
    coop.plain[100000](fake_gpu.array(10, "f32"))
    assert [record.cooperative for record in fake_gpu.launches] == [False]
    assert not any(name == "occupancy" for name, _ in fake_gpu.calls)
