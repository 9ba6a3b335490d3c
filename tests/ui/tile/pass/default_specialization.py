from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel
def k1(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    """No specialize=: a 1024 tile."""
    z.store(tile.load_like(x, z) + 1.0)


@tile.kernel
def k2(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    """No specialize=: a 64 x 64 tile."""
    z.store(tile.load_like(x, z).T.T)
