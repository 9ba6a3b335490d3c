"""Ownership in Tile launches: a handle moved into a launch or a partition is unusable (BT0382)
until ``.sync_on(stream)`` gives fresh handles back."""

from __future__ import annotations

import threading

import pytest
from tile_support import TILE_KERNELS, make_tile_package

from buildtile.errors import MovedError
from buildtile.runtime.tile.handles import partition
from buildtile.runtime.tile.handles import TileTensor, is_moved, tensor


@pytest.fixture
def tiles(make_kernel_package, fake_gpu):
    return make_tile_package(make_kernel_package, {"add": TILE_KERNELS["add"]})


@pytest.fixture
def moved(tiles, fake_gpu):
    """(x, y, zp, pending): three handles just moved into a launch of `add`."""
    x, y = tensor(fake_gpu.array(1000)), tensor(fake_gpu.array(1000))
    zp = partition(fake_gpu.array(1000), [128])
    pending = tiles.add(x, y, zp)
    yield x, y, zp, pending
    if pending._state == "pending":
        pending.cancel()


USES = {
    "attribute": lambda h: h.shape,
    "array": lambda h: h.array,
    "name": lambda h: h.name,
    "cuda array interface": lambda h: h.__cuda_array_interface__,
    "dlpack": lambda h: h.__dlpack__(),
    "dlpack device": lambda h: h.__dlpack_device__(),
    "partition method": lambda h: h.partition([128]),
    "tile.partition": lambda h: partition(h, [128]),
    "tile.tensor again": lambda h: tensor(h),
}


@pytest.mark.parametrize("use", list(USES), ids=list(USES))
def test_every_use_of_a_moved_tensor_is_bt0382(moved, use):
    x, *_ = moved
    with pytest.raises(MovedError) as info:
        USES[use](x)
    assert info.value.code == "BT0382"
    text = str(info.value)
    assert text.startswith("error[BT0382]: use of moved value: `x` was moved into `add` (parameter `x`), so ")
    assert "= help: use the tensors returned by `.sync_on(stream)`, in parameter order: " \
           "`x, y, z = add(...).sync_on(stream)`" in text


def test_the_message_names_the_use(moved):
    x, y, _, _ = moved
    for use, words in [(lambda: x.shape, "so reading `.shape` is not allowed"),
                       (lambda: x.array, "so reading `.array` is not allowed"),
                       (lambda: y.__cuda_array_interface__, "so reading its `__cuda_array_interface__`"),
                       (lambda: y.__dlpack__(), "so exporting it with `__dlpack__()`")]:
        with pytest.raises(MovedError, match=words.replace("(", r"\(").replace(")", r"\)")):
            use()


@pytest.mark.parametrize("use", [lambda p: p.tile_shape, lambda p: p.shape, lambda p: p.num_tiles,
                                 lambda p: p.array, lambda p: p.into_tensor()])
def test_every_use_of_a_moved_partition_is_bt0382(moved, use):
    *_, zp, _ = moved
    with pytest.raises(MovedError, match=r"use of moved value: `z` was moved into `add` \(parameter `z`\)"):
        use(zp)


def test_passing_a_moved_tensor_again_is_bt0382_and_moves_nothing_else(tiles, moved, fake_gpu):
    x, _, _, _ = moved
    y2 = tensor(fake_gpu.array(1000))
    with pytest.raises(MovedError) as info:
        tiles.add(x, y2, partition(fake_gpu.array(1000), [128]))
    assert "so passing it to `add` (parameter `x`) is not allowed" in str(info.value)
    assert not is_moved(y2)


def test_repr_of_a_moved_handle_still_works(moved):
    x, _, zp, _ = moved
    assert repr(x) == "<TileTensor `x` moved into `add` (parameter `x`)>"
    assert repr(zp) == "<Partition `z` moved into `add` (parameter `z`)>"


def test_a_named_tensor_is_called_by_its_name(tiles, fake_gpu):
    lhs = tensor(fake_gpu.array(1000), name="lhs")
    pending = tiles.add(lhs, fake_gpu.array(1000), partition(fake_gpu.array(1000), [128]))
    with pytest.raises(MovedError, match=r"`lhs` was moved into `add` \(parameter `x`\)"):
        _ = lhs.shape
    x, _, _ = pending.sync_on(0)
    assert x.name == "lhs"  # the fresh handle keeps the name


def test_sync_on_gives_back_fresh_live_handles_over_the_same_memory(moved):
    x, _, _, pending = moved
    arrays = [pending._binding.args[k] for k in range(3)]
    x2, y2, z2 = pending.sync_on(0)
    assert [h.array for h in (x2, y2, z2)] == arrays
    assert z2.shape == (1000,) and isinstance(z2, TileTensor)  # the output comes back whole
    with pytest.raises(MovedError):
        _ = x.shape  # the old handles stay moved


def test_returned_handles_chain_into_the_next_launch(tiles, fake_gpu):
    x, y, z = tensor(fake_gpu.array(1000)), tensor(fake_gpu.array(1000)), tensor(fake_gpu.array(1000))
    for _ in range(3):
        z, x, y = tiles.add(z, x, y.partition([256])).sync_on(5)
    assert len(fake_gpu.launches) == 3
    assert {r.stream for r in fake_gpu.launches} == {5}


def test_partitioning_moves_the_tensor_into_the_partition(fake_gpu):
    z = tensor(fake_gpu.array(1000), name="z")
    zp = partition(z, [128])
    with pytest.raises(MovedError) as info:
        _ = z.shape
    assert "`z` was moved into a partition (tile shape (128,))" in str(info.value)
    assert "`partition.into_tensor()`" in str(info.value)
    z = zp.into_tensor()
    assert z.shape == (1000,) and z.name == "z"
    with pytest.raises(MovedError, match=r"moved into a TileTensor by `\.into_tensor\(\)`"):
        _ = zp.tile_shape


def test_an_unnamed_tensor_moved_into_a_partition_is_this_tile_tensor(fake_gpu):
    z = tensor(fake_gpu.array(10))
    z.partition([5])
    with pytest.raises(MovedError, match="use of moved value: this TileTensor was moved into a partition"):
        _ = z.array


def test_raw_arrays_are_wrapped_and_not_tracked(tiles, fake_gpu):
    raw = fake_gpu.array(1000)
    x, _, _ = tiles.add(raw, fake_gpu.array(1000), partition(fake_gpu.array(1000), [128])).sync_on(0)
    assert raw.shape == (1000,)  # still usable: buildtile cannot see uses of a raw array
    assert isinstance(x, TileTensor) and x.array is raw


def test_moved_handles_hold_no_reference_to_their_array(tiles, fake_gpu):
    raw = fake_gpu.array(1000)
    x = tensor(raw)
    out = tiles.add(x, fake_gpu.array(1000), partition(fake_gpu.array(1000), [128])).cancel()
    del raw, out
    assert x._array is None  # the launch (then its results) owned it; the stale handle does not


def test_two_threads_cannot_both_move_one_handle(tiles, fake_gpu):
    x = tensor(fake_gpu.array(1000))
    results: list = []
    barrier = threading.Barrier(8)

    def launch():
        barrier.wait()
        try:
            results.append(tiles.add(x, fake_gpu.array(1000), partition(fake_gpu.array(1000), [128])))
        except MovedError as exc:
            results.append(exc)

    threads = [threading.Thread(target=launch) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    launched = [r for r in results if not isinstance(r, MovedError)]
    assert len(launched) == 1 and len(results) == 8
    launched[0].cancel()
