# expect: BT0594 10:9
from buildtile import simt
from buildtile.types import AtomicSlice, Slice, i32


@simt.kernel(block=256)
def k(keys: Slice[i32], hist: AtomicSlice[i32]):
    i = simt.index_1d()
    if i < len(keys):
        hist[keys[i]] += 1
