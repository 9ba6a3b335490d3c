# expect: BT0428 12:1
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256)
def scale(x: Slice[f32], y: DisjointSlice[f32]):
    i = simt.index_1d()
    y[i] = 2.0 * x[i]


def scale(x, y):
    """A host-side helper of the same name: the module's `scale` is no longer the kernel."""
    return x, y
