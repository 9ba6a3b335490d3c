from buildtile import tile
from buildtile.types import Tensor, f32, i64


@tile.kernel(specialize=[{"z": [32, 64]}])
def k(x: Tensor[f32, 2], seed: i64, z: tile.Out[f32, 2]):
    """tile.rand over a 2-D tile of offsets, tile.randn at a scalar offset."""
    rows, cols = z.tile_shape
    r = tile.arange(rows, i64)[:, None] + z.tile_id(0) * rows
    c = tile.arange(cols, i64)[None, :] + z.tile_id(1) * cols
    u = tile.rand(seed, r * x.shape[1] + c)
    shift = tile.randn(seed + 1, z.tile_id(0))
    z.store(tile.where(u < 0.5, tile.load_like(x, z), 0.0) + shift)
