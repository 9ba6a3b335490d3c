# expect: BT0308 9:31
from buildtile import tile
from buildtile.types import Tensor, f16, f32

T = tile.dtype_var("T", f32, f16)


@tile.kernel(specialize=tile.product(shape=("n",), n=[128]))
def k(x: Tensor[T, 1], alpha: T, z: tile.Out[T, 1]):
    z.store(tile.load_like(x, z))
