from buildtile import tile
from buildtile.types import Tensor, f32, i32


@tile.kernel(specialize=[{"lo": [128], "hi": [128]}, {"lo": [256], "hi": [256]}])
def k(x: Tensor[f32, 1], lo: tile.Out[f32, 1], hi: tile.Out[i32, 1]):
    """Two outputs over one grid of tiles."""
    t = tile.load_like(x, lo)
    lo.store(tile.minimum(t, 0.0))
    hi.store((t > 0.0).astype(i32))
