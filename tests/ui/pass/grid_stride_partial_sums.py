from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i64


@simt.kernel(block=256)
def partial_sums(x: Slice[f32], partial: DisjointSlice[f32]):
    """Each thread sums x[i], x[i + stride], ... and writes its own partial sum."""
    i = simt.index_1d()
    stride = simt.grid_dim.x * simt.block_dim.x
    acc = 0.0
    for k in range(i, len(x), stride):
        acc += x[k]
    partial[i] = acc


@simt.kernel(block=128)
def count_above(x: Slice[f32], threshold: f32, counts: DisjointSlice[i64]):
    i = simt.index_1d()
    stride = simt.grid_dim.x * 128
    n = 0
    for k in range(i, len(x), stride):
        if x[k] > threshold:
            n += 1
    counts[i] = n
