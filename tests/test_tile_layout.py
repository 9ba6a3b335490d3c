"""The layout algebra of the tile lowering, checked element by element against its definition."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from buildtile.backends.tile.layout import (
    Layout,
    canonical,
    mma_accumulator,
    mma_reg,
    mma_shape,
)
from buildtile.backends.tile.mma import swizzle_offset


def elements(layout: Layout) -> dict[tuple[int, int], tuple[int, ...]]:
    """(thread, register) -> coordinates, straight from the definition."""
    out = {}
    for t, r in itertools.product(range(layout.nthreads), range(layout.nregs)):
        out[(t, r)] = tuple(a | b for a, b in zip(layout.thread_coords(t), layout.reg_coords(r)))
    return out


def test_canonical_layout_gives_each_thread_16_contiguous_bytes_and_coalesces_lanes():
    layout = canonical((1024,), 128, 4)
    coords = elements(layout)
    assert [coords[(5, r)][0] for r in range(layout.nregs)] == [20, 21, 22, 23, 532, 533, 534, 535]
    assert layout.vector_run() == 4
    # one warp-wide access covers 512 consecutive bytes
    assert sorted(coords[(t, 0)][0] for t in range(32)) == list(range(0, 128, 4))


def test_canonical_layout_of_f16_and_of_2d_tiles():
    assert canonical((64, 64), 128, 2).vector_run() == 8
    layout = canonical((64, 64), 256, 4)
    assert layout.vector_run() == 4 and layout.replicated_mask == 0
    assert sorted(elements(layout).values()) == sorted(itertools.product(range(64), range(64)))


def test_small_tiles_replicate_over_the_spare_threads():
    layout = canonical((4,), 128, 4)
    assert layout.nregs == 4 and layout.replicated_mask == 127
    assert all(c == (r,) for (t, r), c in elements(layout).items())


@pytest.mark.parametrize("m,n,threads", [(128, 128, 256), (64, 64, 128), (16, 16, 128), (64, 32, 256)])
def test_mma_accumulator_layout_is_the_m16n8k16_fragment_layout(m, n, threads):
    layout = mma_accumulator(m, n, threads)
    s = mma_shape(m, n, threads)
    coords = elements(layout)
    for t in range(threads):
        lane, warp = t % 32, t // 32
        g, tig = lane >> 2, lane & 3
        wc, wr = warp % s.warps_n, (warp // s.warps_n) % s.warps_m
        for fm, fn, c in itertools.product(range(s.frags_m), range(s.frags_n), range(4)):
            # PTX ISA: c0, c1 at row groupID, c2, c3 at row groupID + 8; col 2 * threadID_in_group + (i & 1)
            row = wr * s.warp_m + fm * 16 + g + 8 * (c >> 1)
            col = wc * s.warp_n + fn * 8 + 2 * tig + (c & 1)
            assert coords[(t, mma_reg(s, fm, fn, c))] == (row, col)


def test_reduction_layout_broadcasts_back_without_moving_data():
    layout = canonical((64, 64), 256, 4)
    for axis in (0, 1):
        shape = tuple(1 if d == axis else 64 for d in range(2))
        assert layout.slice(axis).expand(axis) == layout.broadcast_from(shape)
        reduced, rmap = elements(layout.slice(axis)), layout.slice_reg_map(axis)
        for (t, r), coord in elements(layout).items():
            # a thread's register r reduces into its register rmap[r], which stands for the same line
            assert reduced[(t, rmap[r])] == coord[:axis] + coord[axis + 1:]


def test_broadcast_register_map_reads_the_source_element():
    target = canonical((32, 64), 128, 4)
    src_coords, rmap = elements(target.broadcast_from((32, 1))), target.broadcast_reg_map((32, 1))
    for (t, r), (row, _col) in elements(target).items():
        assert src_coords[(t, rmap[r])] == (row, 0)


def test_reshape_and_permute_only_relabel():
    layout = canonical((8, 16, 32), 128, 4)
    flat, moved = elements(layout.reshape((4096,))), layout.permute((2, 0, 1))
    grid = np.arange(4096).reshape(8, 16, 32)
    assert moved.shape == (32, 8, 16)
    moved_coords = elements(moved)
    for (t, r), coord in elements(layout).items():
        assert flat[(t, r)] == (grid[coord],)
        assert moved_coords[(t, r)] == (coord[2], coord[0], coord[1])
    assert moved.inverse_permute((2, 0, 1)) == layout


def test_layouts_reject_bits_that_do_not_cover_the_shape():
    with pytest.raises(ValueError):
        Layout((8,), ((0, 0), (0, 1)), (None,) * 5)


@pytest.mark.parametrize("row_bytes", [16, 32, 64, 128, 256])
def test_swizzle_is_a_permutation_of_each_row_and_conflict_free_for_ldmatrix(row_bytes):
    rows = 32
    offsets = {swizzle_offset(row_bytes, r, c) for r in range(rows) for c in range(row_bytes // 16)}
    assert offsets == set(range(0, rows * row_bytes, 16))
    for r0, c in itertools.product(range(0, rows, 8), range(row_bytes // 16)):
        # one ldmatrix phase: eight rows, one 16-byte chunk each -> eight distinct 16-byte bank groups
        groups = {(swizzle_offset(row_bytes, r0 + k, c) // 16) % 8 for k in range(8)}
        assert len(groups) == 8
