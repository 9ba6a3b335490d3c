# expect: BT0200 10:25
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, complex128


@simt.kernel(block=128)
def k(x: Slice[complex128], out: DisjointSlice[complex128]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = x[i] * 1j
