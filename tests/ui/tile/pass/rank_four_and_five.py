from buildtile import tile
from buildtile.types import Tensor, f16, f32


@tile.kernel(specialize=[{"z": [1, 2, 16, 32]}])
def k4(x: Tensor[f32, 4], z: tile.Out[f32, 4]):
    """(batch, heads, seq, dim) tiles: their leading tile ids fold into one grid axis."""
    t = tile.load_like(x, z)
    z.store(t - t.max(axis=3, keepdims=True))


@tile.kernel(specialize=[{"z": [1, 1, 2, 8, 16]}])
def k5(x: Tensor[f16, 5], z: tile.Out[f32, 5]):
    """A rank-5 load, a permute and a reduction."""
    t = tile.load(x, (z.tile_id(0), z.tile_id(1), z.tile_id(3), z.tile_id(2), z.tile_id(4)), (1, 1, 8, 2, 16))
    z.store(t.permute(0, 1, 3, 2, 4).astype(f32) + tile.sum(t, axis=4, keepdims=True).permute(0, 1, 3, 2, 4))


@tile.kernel
def default4(x: Tensor[f32, 4], z: tile.Out[f32, 4]):
    """No specialize=: a 1 x 4 x 16 x 16 tile."""
    z.store(tile.load_like(x, z).permute(0, 1, 3, 2).permute(0, 1, 3, 2))
