from buildtile import tile
from buildtile.types import Tensor, f32

CHUNK = 64


@tile.kernel(specialize=[{"z": [2, 256]}, {"z": [1, 1024]}])
def k(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    """A block owns a (rows, C) tile and writes it as C / CHUNK chunks of (rows, CHUNK)."""
    row = z.tile_id(0)
    chunks = z.tile_shape[1] // CHUNK
    first = z.tile_id(1) * chunks
    for k in tile.range(chunks):
        t = tile.load(x, (row, first + k), (z.tile_shape[0], CHUNK))
        tile.store(z, (row, first + k), t * 2.0)
