# expect: BT0308 8:12
from buildtile import tile
from buildtile.types import Tensor, bf16, f16, f32


@tile.function
def add(a, b):
    return a + b


@tile.kernel(specialize=[{"z": [128]}])
def k(x: Tensor[f16, 1], y: Tensor[bf16, 1], z: tile.Out[f32, 1]):
    z.store(add(tile.load_like(x, z), tile.load_like(y, z)))
    z.store(add(tile.load_like(x, z), tile.load_like(y, z)))
