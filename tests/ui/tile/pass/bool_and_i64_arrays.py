from buildtile import tile
from buildtile.types import Tensor, bool_, i64


@tile.kernel(specialize=[{"z": [256], "keep": [256]}])
def k(mask: Tensor[bool_, 1], x: Tensor[i64, 1], z: tile.Out[i64, 1], keep: tile.Out[bool_, 1]):
    """Byte-sized and 8-byte elements through the vector and the masked paths."""
    m = tile.load_like(mask, z)
    z.store(tile.where(m, tile.load_like(x, z) * 2, -1))
    keep.store(~m)
