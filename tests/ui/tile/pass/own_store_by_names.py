from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [32, 64]}])
def k(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    """tile.store at the block's own tile, through names bound once to its tile ids."""
    row, col = z.tile_id(0), z.tile_id(1)
    t = tile.load(x, (row, col), z.tile_shape)
    tile.store(z, (row, col), t * 2.0)
