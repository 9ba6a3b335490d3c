"""CUDA samples' ``transposeNoBankConflicts`` over flat row-major arrays: a TILE_DIM x TILE_DIM
tile padded by one column, BLOCK_ROWS rows of threads each doing TILE_DIM / BLOCK_ROWS rows
(with bounds checks added for sizes that are not multiples of the tile)."""

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i32

TILE_DIM = 32
BLOCK_ROWS = 8


@simt.kernel(block=(TILE_DIM, BLOCK_ROWS), requires=["len(idata) == width * height", "len(odata) == len(idata)"])
def transpose_no_bank_conflicts(odata: DisjointSlice[f32], idata: Slice[f32], width: i32, height: i32):
    """odata (height x width becomes width x height) = the transpose of idata."""
    with simt.unsafe():
        tile = simt.shared_array(f32, (TILE_DIM, TILE_DIM + 1))
        x_index = simt.block_idx.x * TILE_DIM + simt.thread_idx.x
        y_index = simt.block_idx.y * TILE_DIM + simt.thread_idx.y
        index_in = x_index + y_index * width
        for i in range(0, TILE_DIM, BLOCK_ROWS):
            if x_index < width and y_index + i < height:
                tile[simt.thread_idx.y + i, simt.thread_idx.x] = idata[index_in + i * width]
        simt.sync_threads()
        x_index = simt.block_idx.y * TILE_DIM + simt.thread_idx.x
        y_index = simt.block_idx.x * TILE_DIM + simt.thread_idx.y
        index_out = x_index + y_index * height
        for i in range(0, TILE_DIM, BLOCK_ROWS):
            if x_index < height and y_index + i < width:
                odata[index_out + i * height] = tile[simt.thread_idx.x, simt.thread_idx.y + i]
