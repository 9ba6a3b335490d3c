import math

from buildtile import tile
from buildtile.types import Tensor, f32

HELD = 1024
CHUNK = 512


@tile.kernel(specialize=[{"z": [4, 256]}, {"z": [1, 1024]}, {"z": [1, 65536]}])
def k(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    """A branch on tile shapes and constants is taken when the kernel is compiled: each
    specialisation types only its own, so one holds its tile and the other walks it in chunks
    (a tile too long to hold), and names bound in either need not agree."""
    rows, cols = z.tile_shape
    i, j = z.tile_id(0), z.tile_id(1)
    if cols > HELD and not rows > 1:
        chunks = cols // CHUNK
        for k in tile.range(chunks):
            t = tile.load(x, (i, j * chunks + k), (rows, CHUNK), padding=-math.inf)
            tile.store(z, (i, j * chunks + k), t * 2.0)
    elif 0 < cols <= HELD:
        t = tile.load_like(x, z)
        z.store(t - tile.max(t, axis=1)[:, None])
