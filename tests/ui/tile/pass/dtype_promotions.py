from buildtile import tile
from buildtile.types import Tensor, f16, f32, f64, i8, i16, i64


@tile.kernel(specialize=[{"z": [256], "w": [256]}])
def k(a: Tensor[i8, 1], b: Tensor[i16, 1], h: Tensor[f16, 1], d: Tensor[f64, 1],
      z: tile.Out[f32, 1], w: tile.Out[i64, 1]):
    """Lossless widening and an integer meeting a float are implicit; a store widens too."""
    ta, tb = tile.load_like(a, z), tile.load_like(b, z)
    z.store(tile.load_like(h, z) * 2.0 + ta)
    w.store(ta + tb + tile.load_like(d, z).astype(i16))
