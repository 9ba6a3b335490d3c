"""The block -> tile mapping of Tile launches and the launch grid the Python host picks.

The kernel side (buildtile/backends/tile/schedule.py) is checked here through
its integer model, which the emitted IR follows step for step (the emulator
runs that IR in test_tile_emulated_grid.py); the host side through the fake
driver, at sizes a GPU launch of one block per tile along y could not take.
"""

from __future__ import annotations

import math
import struct

import pytest
from tile_support import make_tile_package

from buildtile.backends.tile.schedule import grouped, persistent_blocks, persistent_tiles, tile_of_block
from buildtile.errors import ContractError
from buildtile.runtime.contract import MAX_GRID
from buildtile.runtime.testing import DEVICE_MEMORY, FakeCudaArray
from buildtile.runtime.tile.grid import launch_grid, natural_grid, tile_counts
from buildtile.runtime.tile.handles import partition

#: tile counts along each axis: ragged, primes, ones, past 65,535 along a leading axis, past 2^31 in all
COUNTS = [(1,), (7,), (1, 1), (5, 3), (3, 5), (13, 1), (1, 13), (9, 7, 5), (2, 1, 3), (70000, 3),
          (1_000_000, 1), (3, 70000, 2), (70000, 40000), (2**31 - 1, 5)]


def blocks(grid):
    """Linear ids of a grid's blocks, as the kernel computes them: x + nx * (y + ny * z)."""
    nx, ny, _ = grid
    return (x + nx * (y + ny * z) for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0]))


# ----------------------------------------------------------------------------- the host's rule

def test_the_natural_grid_is_kept_where_it_fits():
    assert launch_grid(tile_counts((1000,), (128,))) == (8, 1, 1)
    assert launch_grid(tile_counts((37, 100), (16, 32))) == (4, 3, 1)
    assert launch_grid(tile_counts((3, 9, 17), (2, 4, 8))) == (3, 3, 2)
    assert launch_grid(()) == (1, 1, 1)
    assert launch_grid(tile_counts((0, 5), (4, 4))) == (2, 0, 1)   # empty: nothing to launch


@pytest.mark.parametrize("counts", COUNTS)
def test_every_grid_covers_its_tiles_within_cuda_limits(counts):
    grid = launch_grid(counts)
    assert grid is not None
    assert all(1 <= n <= limit for n, limit in zip(grid, MAX_GRID))
    total = math.prod(counts)
    assert total <= math.prod(grid) < total + grid[0] * grid[1]   # spare blocks: less than one x-y plane
    if all(n <= limit for n, limit in zip(natural_grid(counts), MAX_GRID)):
        assert grid == natural_grid(counts)
    else:
        assert grid[0] == min(total, MAX_GRID[0])


def test_a_million_rows_of_one_tile_run_along_x():
    assert launch_grid(tile_counts((1_000_000, 256), (1, 256))) == (1_000_000, 1, 1)
    assert launch_grid(tile_counts((65536, 1024), (1, 1024))) == (65536, 1, 1)
    assert launch_grid((70000, 40000)) == (MAX_GRID[0], 2, 1)     # 2.8e9 tiles spill into y


def test_what_no_grid_holds_is_none():
    assert launch_grid((2**31,)) is None                          # one axis past x
    assert launch_grid((2**62, 4)) is None                        # past x * y * z
    assert launch_grid((2**31 - 1,)) == (2**31 - 1, 1, 1)


# ----------------------------------------------------------------------------- the kernel's mapping

@pytest.mark.parametrize("limits", [MAX_GRID, (5, 3, 65535), (2, 2, 64), (1, 1, 1 << 20)])
@pytest.mark.parametrize("counts", [c for c in COUNTS if math.prod(c) <= 5000])
def test_every_block_finds_a_distinct_tile_and_every_tile_is_found(counts, limits):
    grid = launch_grid(counts, limits)
    if grid is None:    # one axis takes x alone (up to 2^31 - 1 tiles), or x * y * z blocks are too few
        assert (len(counts) == 1 and counts[0] > limits[0]) or math.prod(counts) > math.prod(limits)
        return
    found = [tile_of_block(b, counts) for b in blocks(grid)]
    tiles = [t for t in found if t is not None]
    assert sorted(tiles) == sorted(_all_tiles(counts))          # each tile exactly once
    if grid == natural_grid(counts):                            # the natural grid: the block's own coordinates
        nx, ny, _ = grid
        for b, t in zip(blocks(grid), found):
            xyz = (b % nx, b // nx % ny, b // (nx * ny))
            assert t == tuple(reversed(xyz[:len(counts)]))


@pytest.mark.parametrize("group", [1, 2, 3, 8, 64])
@pytest.mark.parametrize("rows, cols", [(1, 1), (1, 9), (9, 1), (7, 5), (8, 8), (17, 3), (33, 31), (100, 7)])
def test_the_grouped_order_is_a_bijection(rows, cols, group):
    seen = [grouped(b, rows, cols, group) for b in range(rows * cols)]
    assert sorted(seen) == [(r, c) for r in range(rows) for c in range(cols)]
    assert tile_of_block(rows * cols, (rows, cols), group) is None
    # consecutive blocks stay in one band of `group` rows, walking it column by column
    height = min(group, rows)
    assert [r for r, _ in seen[:height]] == list(range(height)) and {c for _, c in seen[:height]} == {0}


def _all_tiles(counts):
    out = [()]
    for n in counts:
        out = [t + (i,) for t in out for i in range(n)]
    return out


# ----------------------------------------------------------------------------- the Python host, on the fake driver

GRID_KERNELS = {
    "rows": dict(params=[("x", "tensor", "f32", 2), ("z", "tile_out", "f32", 2)],
                 specializations=[dict(tiles={"z": [1, 256]}, block=256), dict(tiles={"z": [1, 1]}, block=32)]),
    "cube": dict(params=[("v", "tile_out", "f32", 3)], specializations=[dict(tiles={"v": [1, 1, 8]}, block=32)]),
    "vec": dict(params=[("z", "tile_out", "f32", 1)], specializations=[dict(tiles={"z": [128]}, block=128)]),
    # as kernels are compiled now: the trailing tile schedule after the declared parameters
    "mm": dict(params=[("a", "tensor", "f32", 2), ("c", "tile_out", "f32", 2), ("s", "tile_out", "f32", 1)],
               specializations=[dict(tiles={"c": [128, 256], "s": [128]}, block=256, shared_bytes=64 * 1024,
                                     schedule=True)]),
    "fill": dict(params=[("z", "tile_out", "f32", 1), ("v", "scalar", "f32")],
                 specializations=[dict(tiles={"z": [1024]}, block=128, schedule=True)]),
}


@pytest.fixture
def grids(make_kernel_package, fake_gpu, monkeypatch):
    """GRID_KERNELS on a fake GPU that takes every made-up pointer for device memory (the arrays
    are too large to back with host memory)."""
    monkeypatch.setattr(fake_gpu, "pointer_memory", lambda ptr: (DEVICE_MEMORY, 0))
    return make_tile_package(make_kernel_package, GRID_KERNELS)


def far(shape, k=0):
    """An array at a made-up device address, far from every other one."""
    return FakeCudaArray(0x1000_0000_0000 * (k + 1), shape)


@pytest.mark.parametrize("shape, tiles, grid", [
    ((1_000_000, 256), (1, 256), (1_000_000, 1, 1)),   # a million rows of [1, C]
    ((1_000_000, 200), (1, 256), (1_000_000, 1, 1)),   # ragged columns
    ((65536, 1024), (1, 256), (262144, 1, 1)),         # 65,536 rows of tiles: was refused along y
    ((70000, 40000), (1, 1), (MAX_GRID[0], 2, 1)),     # 2.8e9 tiles: spills into y
    ((37, 100), (1, 1), (100, 37, 1)),                 # fits: the natural grid
])
def test_two_dimensional_partitions_past_65535_rows_launch(grids, fake_gpu, shape, tiles, grid):
    x, z = far(shape), far(shape, 1)
    grids.rows(x, partition(z, tiles)).sync_on(0)
    record = fake_gpu.launches[-1]
    assert record.grid == grid
    assert struct.unpack_from("<Qqqqq", record.params, 40) == (z.ptr, *shape, shape[1], 1)


@pytest.mark.parametrize("shape, grid", [
    ((70000, 3, 8), (210000, 1, 1)),        # 70,000 tiles along z's axis
    ((3, 70000, 16), (420000, 1, 1)),       # along y's
    ((2, 3, 17), (3, 3, 2)),                # natural
])
def test_three_dimensional_partitions_past_65535_launch(grids, fake_gpu, shape, grid):
    grids.cube(partition(far(shape), [1, 1, 8])).sync_on(0)
    assert fake_gpu.launches[-1].grid == grid


def test_one_axis_past_grid_x_is_bt0600(grids, fake_gpu):
    with pytest.raises(ContractError) as info:
        grids.vec(partition(far((128 * 2**31,)), [128]))
    assert ("kernel `vec` needs 2147483648 tiles along axis 0 of `z` (shape (274877906944,), tile shape (128,)), "
            "but CUDA runs at most 2147483647 blocks along x") in str(info.value)
    assert fake_gpu.launches == []


@pytest.mark.parametrize("group", [0, 1, 3, 8])
@pytest.mark.parametrize("counts", [(1, 1), (7, 5), (33, 31), (100, 7), (9, 7, 5)])
@pytest.mark.parametrize("blocks", [1, 2, 7, 132 * 2, 10_000])
def test_persistent_blocks_take_every_tile_once_in_either_order(counts, group, blocks):
    total = math.prod(counts)
    p = persistent_blocks(total, blocks, 1)
    taken = [tile_of_block(t, counts, group) for b in range(p) for t in persistent_tiles(b, p, total)]
    assert None not in taken and sorted(taken) == sorted(_all_tiles(counts))
    assert p == min(total, blocks)


# ----------------------------------------------------------------------------- tile orders on the host partition

def test_a_partition_records_its_order(fake_gpu):
    p = partition(fake_gpu.array((300, 500)), [128, 256], order="grouped", group=4)
    assert (p.schedule.order, p.schedule.group, p.schedule.persistent) == ("grouped", 4, False)
    assert partition(fake_gpu.array((300, 500)), [128, 256], order="grouped").schedule.group == 8
    q = partition(fake_gpu.array(1000), [128], persistent=True)
    assert (q.schedule.order, q.schedule.group, q.schedule.persistent) == (None, 0, True)
    assert [p.schedule.word, q.schedule.word] == [4, -1]
    assert partition(fake_gpu.array((300, 500)), [128, 256], order="row").schedule.word == 1
    assert "order='grouped', group=4" in repr(p)


@pytest.mark.parametrize("options, words", [
    (dict(order="zigzag"), "unknown tile order: `order` is 'zigzag'"),
    (dict(order=3), "unknown tile order: `order` is 3"),
    (dict(order="grouped", group=0), "`group` must be at least 1 (tile rows per band), got 0"),
    (dict(order="grouped", group=-2), "`group` must be at least 1 (tile rows per band), got -2"),
    (dict(order="grouped", group=2.5), "`group` is a number of tile rows, an int, got"),
    (dict(order="grouped", group=True), "`group` is a number of tile rows, an int, got"),
    (dict(order="row", group=4), "`group` is an option of the grouped order, but `order` is 'row'"),
    (dict(group=4), "`group` is an option of the grouped order, but `order` is None"),
    (dict(persistent="yes"), "`persistent` is True or False, got"),
])
def test_bad_partition_options_are_bt0600_naming_the_option(fake_gpu, options, words):
    from buildtile.runtime.tile.handles import tensor

    handle = tensor(fake_gpu.array((300, 500)))
    with pytest.raises(ContractError) as info:
        partition(handle, [128, 256], **options)
    assert info.value.code == "BT0600" and words in str(info.value)
    handle.array   # nothing was moved  # noqa: B018


def test_the_grouped_order_needs_a_two_dimensional_partition(fake_gpu):
    with pytest.raises(ContractError) as info:
        partition(fake_gpu.array(1000), [128], order="grouped")
    assert "the grouped order is an order of 2-D tile grids, but the tile shape has 1 axis" in str(info.value)


def test_a_launch_refuses_a_schedule_its_kernel_does_not_take(grids, fake_gpu):
    with pytest.raises(ContractError) as info:
        grids.rows(fake_gpu.array((40, 256)), partition(fake_gpu.array((40, 256)), [1, 256], order="grouped"))
    assert ("kernel `rows` visits its tiles in the order it was compiled with, but the partition of `z` asks "
            "for order='grouped', group=8") in str(info.value)   # built before kernels took a schedule
    assert fake_gpu.launches == []


def test_the_schedule_is_the_last_kernel_parameter(grids, fake_gpu):
    a, c, s = fake_gpu.array((1000, 3000)), fake_gpu.array((1000, 3000)), fake_gpu.array(1000)
    for options, word in [({}, -1), (dict(order="row"), 1), (dict(order="grouped"), 8),
                          (dict(order="grouped", group=3), 3)]:
        grids.mm(a, partition(c, [128, 256], **options), partition(s, [128])).sync_on(0)
        record = fake_gpu.launches[-1]
        assert record.grid == (12, 8, 1)                         # one block per tile in every order
        layout = grids.mm.signature.layout
        assert len(layout.offsets) == 5 + 5 + 3 + 1 and len(record.params) == layout.size
        assert struct.unpack_from("<q", record.params, layout.offsets[-1]) == (word,)


def test_a_persistent_launch_is_one_wave_along_x(grids, fake_gpu):
    a, c, s = fake_gpu.array((1000, 3000)), fake_gpu.array((1000, 3000)), fake_gpu.array(1000)
    pending = grids.mm(a, partition(c, [128, 256], order="grouped", persistent=True), partition(s, [128]))
    assert pending.grid == (96, 1, 1)                 # 8 x 12 tiles: fewer than 132 SMs x 3 blocks of 64 KiB
    pending.sync_on(0)
    pending = grids.fill(partition(fake_gpu.array(10_000_000), [1024], persistent=True), 1.5)
    assert pending.grid == (132 * 16, 1, 1)           # 9766 tiles: 132 SMs x 16 blocks of 128 threads
    pending.cancel()
    fake_gpu.multiprocessors = 8
    pending = grids.fill(partition(fake_gpu.array(10_000_000), [1024], persistent=True), 1.5)
    assert pending.grid == (8 * 16, 1, 1)
    pending.cancel()
    pending = grids.fill(partition(fake_gpu.array(0), [1024], persistent=True), 1.5)
    assert pending.grid == (0, 1, 1)                  # nothing to launch
    pending.cancel()


def test_only_the_grid_output_chooses_the_order(grids, fake_gpu):
    a, c, s = fake_gpu.array((1000, 3000)), fake_gpu.array((1000, 3000)), fake_gpu.array(1000)
    with pytest.raises(ContractError) as info:
        grids.mm(a, partition(c, [128, 256]), partition(s, [128], persistent=True))
    assert ("kernel `mm` visits the tiles of `c`, so the partition of `s` cannot choose their order "
            "(persistent=True)") in str(info.value)
