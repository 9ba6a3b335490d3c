from buildtile import tile
from buildtile.types import Tensor, bf16, f16, f32

#: an element type the kernels are generic over: f32 (the default), f16 or bf16
T = tile.dtype_var("T", f32, f16, bf16)
#: tile shapes computed from constants
COLS = tile.next_power_of_2(200)
#: one product for several kernels; tiles above 512 elements are dropped
ROWS = tile.product(shape=("rows", "cols"), rows=[1, 4], cols=[COLS, 2 * COLS], max_elements=512)


@tile.kernel(specialize=ROWS)
def scale(x: Tensor[T, 2], z: tile.Out[T, 2]):
    """Computed in f32, stored in the arrays' dtype (`x.dtype`)."""
    t = tile.load_like(x, z).astype(f32)
    z.store((t * 2.0).astype(x.dtype))


@tile.kernel(specialize=tile.product(shape=("n",), n=[128, 256], T=[f16, bf16]))
def shift(x: Tensor[T, 1], z: tile.Out[T, 1]):
    """A product that binds T to two of its dtypes; `tile.full(..., T)` is the bound dtype."""
    z.store(tile.load_like(x, z) + tile.full(z.tile_shape, 1.0, T))
