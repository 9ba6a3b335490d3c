# expect: BT0600 8:63
from buildtile import tile
from buildtile.types import Tensor, bf16, f16, f32

T = tile.dtype_var("T", f32, f16)


@tile.kernel(specialize=tile.product(shape=("n",), n=[128], T=[f16, bf16]))
def k(x: Tensor[T, 1], z: tile.Out[T, 1]):
    z.store(tile.load_like(x, z))
