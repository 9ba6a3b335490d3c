# expect: BT0308 9:33 BT0308 15:13
from buildtile import tile
from buildtile.types import Tensor, f32, i32


@tile.kernel(specialize=[{"z": [4]}])
def past_the_last_axis(x: Tensor[f32, 2], z: tile.Out[i32, 1]):
    t = tile.load(x, (z.tile_id(0), 0), (4, 256))
    z.store(tile.argmax(t, axis=2))


@tile.kernel(specialize=[{"z": [4]}])
def of_bools(x: Tensor[f32, 2], z: tile.Out[i32, 1]):
    t = tile.load(x, (z.tile_id(0), 0), (4, 256))
    z.store((t > 0.0).argmin(axis=1))
