from buildtile import tile
from buildtile.types import Tensor, f32


@tile.kernel(specialize=[{"z": [64, 64]}])
def k(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    """Chunks along both axes, with a constant offset and a stepped loop: 4 x 2 chunks of 16 x 32."""
    for i in tile.range(0, 4, 2):
        for j in tile.range(2):
            for d in tile.range(2):
                r = z.tile_id(0) * 4 + i + d
                c = 2 * z.tile_id(1) + j
                tile.store(z, (r, c), tile.load(x, (r, c), (16, 32)) + 1.0)
