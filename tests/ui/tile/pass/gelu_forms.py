from buildtile import tile
from buildtile.types import Tensor, bf16, f16, f32, f64

T = tile.dtype_var("T", f16, bf16, f32, f64)


@tile.kernel(specialize=[{"z": [32, 64]}])
def bias_gelu(x: Tensor[T, 2], bias: Tensor[T, 1], z: tile.Out[T, 2]):
    """Both forms of gelu in every float dtype, on a tile and on a scalar from it."""
    t = tile.load_like(x, z) + tile.load(bias, (z.tile_id(1),), (64,))[None, :]
    exact = tile.gelu(t)
    z.store(exact + tile.gelu(t, approximate="tanh") * tile.gelu(tile.sum(exact), approximate="none"))
