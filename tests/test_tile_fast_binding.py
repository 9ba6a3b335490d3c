"""The Tile launch's fast binder on a fake GPU: what it memoizes never outlives what chose it.

Launches that repeat are bound by buildtile/runtime/tile/fast_binding.py with memoized
specializations, grids and layouts; these tests change one thing at a time between launches and
check that the launch follows it, and that a bad argument after good launches is still refused
before anything is queued.
"""

from __future__ import annotations

import pytest
from tile_support import TILE_KERNELS, make_tile_package

from buildtile.errors import AliasingError, ContractError, MovedError, TypeMismatchError
from buildtile.runtime.testing import FakeCudaArray
from buildtile.runtime.tile.handles import partition, tensor


@pytest.fixture
def tiles(make_kernel_package, fake_gpu):
    return make_tile_package(make_kernel_package, TILE_KERNELS)


def warmed(tiles, fake_gpu, n=1000):
    """Three arrays of ``n`` floats, after two good launches of `add` over them."""
    x, y, z = fake_gpu.array(n), fake_gpu.array(n), fake_gpu.array(n)
    for _ in range(2):
        tiles.add(x, y, partition(z, [128])).launch()
    return x, y, z


def test_a_repeated_launch_follows_a_moved_pointer(tiles, fake_gpu):
    x, y, z = warmed(tiles, fake_gpu)
    moved = fake_gpu.array(1000)
    x.ptr = moved.ptr   # the same object, now over other memory
    tiles.add(x, y, partition(z, [128])).launch()
    assert fake_gpu.launches[-1].param(0, "Q") == moved.ptr


def test_a_repeated_launch_follows_a_changed_shape_and_tile_shape(tiles, fake_gpu):
    x, y, z = warmed(tiles, fake_gpu)
    x2, y2, z2 = fake_gpu.array(5000), fake_gpu.array(5000), fake_gpu.array(5000)
    tiles.add(x2, y2, partition(z2, [128])).launch()
    assert (fake_gpu.launches[-1].grid, fake_gpu.launches[-1].param(1, "q")) == ((40, 1, 1), 5000)
    tiles.add(x2, y2, partition(z2, [256])).launch()
    assert (fake_gpu.launches[-1].grid, fake_gpu.launches[-1].block) == ((20, 1, 1), (256, 1, 1))


def test_a_repeated_launch_waits_on_a_newly_named_producer_stream(tiles, fake_gpu):
    x, y, z = warmed(tiles, fake_gpu)
    x.stream = 77
    fake_gpu.calls.clear()
    tiles.add(x, y, partition(z, [128])).launch(stream=5)
    assert [c for c in fake_gpu.calls if c[0] == "stream_wait"] == [("stream_wait", (5, 77))]


def test_a_launch_after_good_ones_is_still_refused_before_anything_is_queued(tiles, fake_gpu):
    x, y, z = warmed(tiles, fake_gpu)
    fake_gpu.calls.clear()
    x.readonly, z.readonly = False, True
    with pytest.raises(TypeMismatchError, match="read-only, and the kernel writes it"):
        tiles.add(x, y, partition(z, [128]))
    z.readonly = False
    x.shape = (999,)
    with pytest.raises(ContractError, match="requires `len"):
        tiles.add(x, y, partition(z, [128]))
    x.shape = (1000,)
    with pytest.raises(AliasingError):
        tiles.add(x, x, partition(z, [128]))
    with pytest.raises(TypeMismatchError, match="not an integer"):
        tiles.add(FakeCudaArray(x.ptr, (True,) * 1), y, partition(z, [128]))
    with pytest.raises(TypeMismatchError, match="not aligned"):
        tiles.add(FakeCudaArray(x.ptr + 2, (1000,)), y, partition(z, [128]))
    with pytest.raises(ContractError, match="no specialization"):
        tiles.add(x, y, partition(z, [64]))
    assert fake_gpu.queued == []


def test_a_moved_handle_is_refused_after_good_launches_with_it(tiles, fake_gpu):
    x, y, z = warmed(tiles, fake_gpu)
    xt = tensor(x)
    xt, y2, zt = tiles.add(xt, y, partition(z, [128])).launch()
    stale = xt
    tiles.add(xt, y, partition(zt, [128])).launch()
    fake_gpu.calls.clear()
    with pytest.raises(MovedError, match="was moved into `add`"):
        tiles.add(stale, y, partition(fake_gpu.array(1000), [128]))
    assert fake_gpu.queued == []
