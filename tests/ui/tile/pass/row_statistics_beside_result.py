import math

from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [1, 1024], "row_max": [1], "row_sum": [1]},
                         {"z": [4, 256], "row_max": [4], "row_sum": [4]}])
def k(x: Tensor[f32, 2], z: tile.Out[f32, 2], row_max: tile.Out[f32, 1], row_sum: tile.Out[f32, 1]):
    """A 2-D softmax with its per-row statistics beside it: the 1-D outputs follow z's rows."""
    t = tile.load_like(x, z, padding=-math.inf)
    m = tile.max(t, axis=1)
    e = tile.exp(t - m[:, None])
    s = tile.sum(e, axis=1)
    z.store(e / s[:, None])
    row_max.store(m)
    tile.store(row_sum, (z.tile_id(0),), s)
