import math

from buildtile import tile
from buildtile.types import Tensor, f32, i32, i64

LOG2E = 1.0 / math.log(2)


@tile.kernel(specialize=[{"z": [256]}])
def k(x: Tensor[f32, 1], m: Tensor[i32, 1], n: i64, step: i64, z: tile.Out[f32, 1]):
    """A run-time step, a negative one, a shadowed parameter, folded math, an int condition, powers."""
    acc = tile.zeros((256,), f32)
    n = n * 2
    for i in tile.range(0, n, step):
        acc += 1.0
    for i in tile.range(n, 0, -1):
        acc -= 0.5
    t = tile.load_like(x, z)
    v = tile.where(tile.load_like(m, z), t, -t) * LOG2E + math.sqrt(2.0)
    v **= 2
    z.store(acc + v ** 3 + tile.arange(0, 256).astype(f32))
