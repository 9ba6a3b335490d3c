"""The layout algebra of the tile lowering, checked element by element against its definition."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from buildtile.backends.tile.layout import (
    Layout,
    canonical,
    mma_a_layout,
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


@pytest.mark.parametrize("m,k,threads", [(128, 64, 256), (64, 32, 128), (128, 128, 256), (32, 16, 64)])
def test_rows_only_accumulators_are_the_a_fragments_of_the_next_mma(m, k, threads):
    s = mma_shape(m, k, threads, rows_only=True)
    assert (s.warps_m, s.warps_n) == (threads // 32, 1)
    layout = mma_a_layout(s, k)
    # a result computed elementwise from an accumulator of whole rows is already in A's layout
    assert layout == mma_accumulator(m, k, threads, rows_only=True)
    coords = elements(layout)
    for t in range(threads):
        lane, warp = t % 32, t // 32
        g, tig = lane >> 2, lane & 3
        for fm, ks, w, half in itertools.product(range(s.frags_m), range(k // 16), range(4), range(2)):
            # PTX ISA, m16n8k16 A: a0a1 at (g, 2t..), a2a3 (g + 8, 2t..), a4a5 (g, 2t + 8..), a6a7 (g + 8, 2t + 8..)
            r = layout.reg_index((fm * 16 + 8 * (w & 1), ks * 16 + 8 * (w >> 1))) + half
            row, col = warp * s.warp_m + fm * 16 + g + 8 * (w & 1), ks * 16 + 2 * tig + half + 8 * (w >> 1)
            assert coords[(t, r)] == (row, col)


def test_rows_only_needs_sixteen_rows_a_warp():
    assert mma_shape(128, 128, 256).warps_n == 2 and mma_shape(128, 128, 256, rows_only=True).warps_n == 1
    # 8 warps of 8 rows would not fill a fragment: the usual split
    assert mma_shape(64, 64, 256, rows_only=True) == mma_shape(64, 64, 256)


def test_a_operand_of_a_split_mma_is_copied_over_the_warps_along_n():
    s = mma_shape(64, 64, 128)                  # 2 x 2 warps
    layout = mma_a_layout(s, 32)
    assert layout.replicated_mask == 1 << 5     # the warp bit along N: both hold the same rows
    assert sorted(set(elements(layout).values())) == sorted(itertools.product(range(64), range(32)))


@pytest.mark.parametrize("row_bytes", [32, 64, 128, 256, 512])
def test_fragment_addresses_are_one_base_xor_and_plus_constants(row_bytes):
    # what mma._Fragments emits: a lane's address in a warp's first 16 x 16 block, XOR the chunk
    # offset of another block, plus its row offset, for a tile at a multiple of its row length
    chunks = row_bytes // 16
    for warp_chunks in (w for w in (2, 4, 8, 16, 32) if w <= chunks):     # a warp's part: 16 columns or more
        warps = range(chunks // warp_chunks)
        for tile_offset, warp_row, warp in itertools.product((0, 4 * row_bytes), (0, 16, 48), warps):
            for lane_row, half_row, half_chunk in itertools.product(range(8), range(2), range(2)):
                row, chunk = warp_row + lane_row + 8 * half_row, warp * warp_chunks + half_chunk
                base = tile_offset + swizzle_offset(row_bytes, row, chunk)
                for chunk_step, row_step in itertools.product(range(0, warp_chunks, 2), (0, 16, 32)):
                    got = (base ^ (chunk_step * 16)) + row_step * row_bytes
                    assert got == tile_offset + swizzle_offset(row_bytes, row + row_step, chunk + chunk_step)


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
