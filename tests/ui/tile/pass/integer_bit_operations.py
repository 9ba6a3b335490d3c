from buildtile import tile
from buildtile.types import Tensor, i8, i32, u8, u16, u32


@tile.kernel(specialize=[{"z": [256]}])
def k(x: Tensor[u8, 1], s: Tensor[u16, 1], k: i32, z: tile.Out[u32, 1]):
    """Bitwise operators and shifts by constants, by a tile and by a run-time scalar."""
    a = tile.load_like(x, z).astype(u32)
    amount = tile.load_like(s, z).astype(u32)
    z.store(((a << 3) ^ (a >> amount) | ~a & (a >> k)) % 7 + a // 3)


@tile.kernel(specialize=[{"z": [256]}])
def signed(x: Tensor[i8, 1], z: tile.Out[i8, 1]):
    """`>>` of a signed type is arithmetic."""
    z.store(tile.load_like(x, z) >> 2)
