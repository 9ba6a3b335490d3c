# expect: BT0308 6:31
from buildtile import tile
from buildtile.types import Tensor, f32

@tile.kernel(specialize=[{"out": [256]}])
def k(x: Tensor[f32, 1], out: tile.Tensor[f32, 1]):
    out.store(tile.load_like(x, out))
