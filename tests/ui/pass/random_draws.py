from buildtile import random, simt
from buildtile.types import DisjointSlice, f32, u32, u64


@simt.kernel(block=128)
def draws(words: DisjointSlice[u32], uniform: DisjointSlice[f32], normal: DisjointSlice[f32], seed: u64):
    """Thread i: word i % 4 of the Philox block (seed, i, counter 5), and one uniform and one normal draw."""
    i = simt.index_1d()
    if i < len(words):
        k = i % 4
        w = random.philox(seed, i, 5, 0)
        if k == 1:
            w = random.philox(seed, i, 5, 1)
        elif k == 2:
            w = random.philox(seed, i, 5, 2)
        elif k == 3:
            w = random.philox(seed, i, 5, 3)
        words[i] = w
        uniform[i] = random.uniform(seed, i)
        normal[i] = random.normal(seed, i)
