from buildtile import tile
from buildtile.types import Tensor, f32

BLOCK = 256
HALF = BLOCK // 2


@tile.kernel(specialize=[{"z": [BLOCK]}])
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    """Tile shapes from module constants, tile_shape entries, names bound once and t.shape."""
    n = z.tile_shape[0]
    width = n // 2
    t = tile.load(x, (z.tile_id(0),), (n,))
    halves = t.reshape((2, width))
    low = tile.load(x, (2 * z.tile_id(0),), (HALF,))
    z.store((halves + low[None, :]).reshape(t.shape))
