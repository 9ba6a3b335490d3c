"""Kernels that synchronise the whole grid: one launch, several phases.

A ``cooperative=True`` contract launches every block at once (``prepare()``
refuses a grid the device cannot hold resident), so ``simt.grid_sync()``
can wait for all of them: what every block wrote before it is visible to
every block after it.
"""

from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, Slice, f32, i32, u32

COOPERATIVE_BLOCK = 256


@simt.kernel(block=COOPERATIVE_BLOCK, cooperative=True, requires=["len(freq) == len(counts)"])
def normalized_histogram(values: Slice[i32], counts: AtomicSlice[u32], freq: DisjointSlice[f32]):
    """counts[b] += how many values fall in bin b; freq[b] = counts[b] / len(values), in one launch.

    ``counts`` starts at zero; values outside ``0 <= v < len(counts)`` are not counted.
    """
    for i in range(simt.grid(1), len(values), simt.gridsize(1)):
        v = values[i]
        if v >= 0 and v < len(counts):
            counts.atomic_add(v, 1)
    simt.grid_sync()
    total = f32(len(values))
    for b in range(simt.grid(1), len(freq), simt.gridsize(1)):
        freq[b] = f32(counts[b]) / total
