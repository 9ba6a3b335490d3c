# expect: BT0308 10:28
from buildtile import simt
from buildtile.types import AtomicSlice, Slice, i32, i64


@simt.kernel(block=256)
def k(x: Slice[i64], hist: AtomicSlice[i32]):
    i = simt.index_1d()
    if i < len(x):
        hist.atomic_add(0, x[i])
