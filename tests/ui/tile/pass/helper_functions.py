from buildtile import tile
from buildtile.types import Tensor, f32


@tile.function
def clamp(t, lo, hi=1.0):
    return tile.minimum(tile.maximum(t, lo), hi)


@tile.function
def split(t):
    return clamp(t, 0.0), clamp(-t, 0.0)


@tile.kernel(specialize=[{"pos": [256], "neg": [256]}])
def k(x: Tensor[f32, 1], pos: tile.Out[f32, 1], neg: tile.Out[f32, 1]):
    """Helpers inlined: defaults, a tuple result, a helper calling a helper."""
    p, n = split(tile.load_like(x, pos))
    pos.store(p)
    neg.store(clamp(n, 0.0, hi=0.5))
