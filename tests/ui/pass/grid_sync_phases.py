from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, Slice, f32, f64, u32


@simt.kernel(block=128, cooperative=True, requires=["len(out) == len(x)"])
def subtract_mean(x: Slice[f64], total: AtomicSlice[f64], out: DisjointSlice[f64]):
    """out = x - mean(x) in one launch: every block adds its share, the grid meets, then each
    thread reads the sum."""
    for i in range(simt.grid(1), len(x), simt.gridsize(1)):
        total.atomic_add(0, x[i])
    simt.grid_sync()
    mean = total.atomic_add(0, 0.0) / f64(len(x))
    for j in range(simt.grid(1), len(x), simt.gridsize(1)):
        out[j] = x[j] - mean


@simt.kernel(block=256, cooperative=True)
def two_barriers(flags: AtomicSlice[u32], out: DisjointSlice[f32]):
    """Two grid barriers in a row, one inside a loop every thread runs the same number of times."""
    flags.atomic_add(0, 1)
    for step in range(3):
        simt.grid_sync()
    i = simt.index_1d()
    if i < len(out):
        out[i] = f32(flags.atomic_add(0, 0))
