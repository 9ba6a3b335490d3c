"""The Python host of Tile kernels with every element type and tensors of rank 4 and 5, on a
fake GPU: the launch grid folds the leading tile axes into z (as the kernels unfold them), and
arrays of the narrow and unsigned types pass as themselves."""

from __future__ import annotations

import struct

import pytest
from tile_support import make_tile_package

from buildtile.errors import TypeMismatchError
from buildtile.runtime.tile.grid import tile_grid
from buildtile.runtime.tile.handles import partition

DTYPES = ["f16", "bf16", "f32", "f64", "i8", "u8", "i16", "u16", "i32", "u32", "i64"]
KERNELS = {
    "fill5d": dict(params=[("v", "tile_out", "i8", 5)], specializations=[dict(tiles={"v": [1, 2, 2, 4, 8]}, block=64)]),
    "copy4d": dict(params=[("x", "tensor", "u16", 4), ("z", "tile_out", "bf16", 4)],
                   specializations=[dict(tiles={"z": [1, 2, 16, 32]}, block=128)]),
    **{f"copy_{d}": dict(params=[("x", "tensor", d, 1), ("z", "tile_out", d, 1)],
                         specializations=[dict(tiles={"z": [256]}, block=128)]) for d in DTYPES},
}


@pytest.fixture
def tiles(make_kernel_package, fake_gpu):
    return make_tile_package(make_kernel_package, KERNELS)


def test_tile_grid_folds_the_axes_before_rank_3_into_z():
    assert tile_grid((3, 5, 3, 9, 17), (1, 2, 2, 4, 8)) == (3, 3, 3 * 3 * 2)
    assert tile_grid((2, 8, 100, 64), (1, 2, 16, 32)) == (2, 7, 2 * 4)
    assert tile_grid((0, 8, 100, 64), (1, 2, 16, 32)) == (2, 7, 0)


def test_a_rank5_output_launches_one_block_per_tile(tiles, fake_gpu):
    tiles.fill5d(partition(fake_gpu.array((3, 5, 3, 9, 17), "i8"), [1, 2, 2, 4, 8])).sync_on(0)
    record = fake_gpu.launches[-1]
    assert (record.grid, record.block) == ((3, 3, 18), (64, 1, 1))
    # pointer, five extents, five strides (in elements)
    assert struct.unpack_from("<Q5q5q", record.params)[1:] == (3, 5, 3, 9, 17, 5 * 3 * 9 * 17, 3 * 9 * 17, 9 * 17, 17, 1)


def test_a_rank4_input_and_output_pass_with_their_dtypes(tiles, fake_gpu):
    x, z = fake_gpu.array((2, 8, 100, 64), "u16"), fake_gpu.array((2, 8, 100, 64), "bf16")
    tiles.copy4d(x, partition(z, [1, 2, 16, 32])).sync_on(0)
    assert fake_gpu.launches[-1].grid == (2, 7, 8)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_tile_dtype_is_accepted_as_itself(tiles, fake_gpu, dtype):
    x, z = fake_gpu.array(1000, dtype), fake_gpu.array(1000, dtype)
    getattr(tiles, f"copy_{dtype}")(x, partition(z, [256])).sync_on(0)
    assert fake_gpu.launches[-1].grid == (4, 1, 1)


def test_an_array_of_another_dtype_is_refused_by_name(tiles, fake_gpu):
    x, z = fake_gpu.array(1000, "i16"), fake_gpu.array(1000, "u8")
    with pytest.raises(TypeMismatchError) as info:
        tiles.copy_u8(x, partition(z, [256]))
    assert "expects Tensor[u8, 1], got int16 array" in str(info.value)
