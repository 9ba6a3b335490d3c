# expect: BT0600 5:5
from buildtile import tile
from buildtile.types import Tensor, f16, f32

T = tile.dtype_var("U", f32, f16)


@tile.kernel(specialize=[{"z": [128]}])
def k(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
    z.store(tile.load_like(x, z))
