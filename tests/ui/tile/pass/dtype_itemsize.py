from buildtile import tile
from buildtile.types import Tensor, bf16, f32

T = tile.dtype_var("T", f32, bf16)
CHUNK_BYTES = 2048


@tile.kernel(specialize=[{"z": [1024], "T": f32}, {"z": [1024], "T": bf16}])
def k(x: Tensor[T, 1], z: tile.Out[T, 1]):
    """`T.itemsize`, `x.dtype.itemsize` and `f32.itemsize` are the element's bytes at compile time:
    a chunk of a fixed byte count takes 512 f32 or 1024 bf16 elements."""
    n = CHUNK_BYTES // T.itemsize
    if x.dtype.itemsize < f32.itemsize:
        z.store(tile.load_like(x, z))
    else:
        for c in tile.range(z.tile_shape[0] // n):
            part = tile.load(x, (z.tile_id(0) * (z.tile_shape[0] // n) + c,), (n,))
            tile.store(z, (z.tile_id(0) * (z.tile_shape[0] // n) + c,), part)
