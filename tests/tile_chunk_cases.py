"""Tile kernels that write their own tile in chunks, run on the CPU emulator
(tests/test_tile_chunks.py) and on a GPU (tests/gpu/test_tile_chunk_stores.py)."""

import math

from buildtile import tile
from buildtile.types import Tensor, f32

CHUNK = 64


@tile.kernel(specialize=[{"z": [2, 256]}, {"z": [1, 1024]}])
def chunk_index_added(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    """z[:, j] = x[:, j] + j // CHUNK: each chunk stored where its index says."""
    row = z.tile_id(0)
    chunks = z.tile_shape[1] // CHUNK
    first = z.tile_id(1) * chunks
    for k in tile.range(chunks):
        t = tile.load(x, (row, first + k), (z.tile_shape[0], CHUNK))
        tile.store(z, (row, first + k), t + f32(first + k))


@tile.kernel(specialize=[{"z": [1, 1024]}, {"z": [4, 256]}])
def softmax_chunked(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    """A row softmax that walks the block's row region three times in chunks of CHUNK columns:
    the maximum, the sum of exponentials, then the normalised chunks."""
    rows = z.tile_shape[0]
    chunks = z.tile_shape[1] // CHUNK
    row = z.tile_id(0)
    first = z.tile_id(1) * chunks
    m = tile.full((rows,), -math.inf, f32)
    for k in tile.range(chunks):
        m = tile.maximum(m, tile.max(tile.load(x, (row, first + k), (rows, CHUNK), padding=-math.inf), axis=1))
    s = tile.zeros((rows,), f32)
    for k in tile.range(chunks):
        t = tile.load(x, (row, first + k), (rows, CHUNK), padding=-math.inf)
        s = s + tile.sum(tile.exp(t - m[:, None]), axis=1)
    for k in tile.range(chunks):
        t = tile.load(x, (row, first + k), (rows, CHUNK), padding=-math.inf)
        tile.store(z, (row, first + k), tile.exp(t - m[:, None]) / s[:, None])


@tile.kernel(specialize=[{"z": [64, 64]}])
def quadrants_reversed(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    """Chunks along both axes in a stepped, offset loop: 4 x 2 chunks of 16 x 32, each scaled by its place."""
    for i in tile.range(0, 4, 2):
        for j in tile.range(2):
            for d in tile.range(2):
                r = z.tile_id(0) * 4 + (3 - i - d)
                c = 2 * z.tile_id(1) + j
                tile.store(z, (r, c), tile.load(x, (r, c), (16, 32)) * f32(r * 10 + c))
