# expect: BT0308 10:9
from buildtile import simt
from buildtile.types import AtomicSlice, Slice, f32


@simt.kernel(block=256)
def k(x: Slice[f32], lo: AtomicSlice[f32]):
    i = simt.index_1d()
    if i < len(x):
        lo.atomic_min(0, x[i])
