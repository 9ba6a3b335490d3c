from buildtile import tile
from buildtile.types import Tensor, f32, i32


@tile.kernel(specialize=[{"z": [128]}])
def k(x: Tensor[f32, 1], bucket: Tensor[i32, 1], z: tile.Out[f32, 1], sums: tile.Atomic[f32, 1],
      grid: tile.Atomic[i32, 2]):
    """Atomic adds: a tile of values at a tile of indices, masked; a scalar value at a 2-D index."""
    t = tile.load_like(x, z)
    b = tile.load_like(bucket, z, padding=-1)
    z.store(t)
    tile.atomic_add(sums, b, t, mask=t > 0.0)
    tile.atomic_add(grid, (z.tile_id(0), b), 1)
