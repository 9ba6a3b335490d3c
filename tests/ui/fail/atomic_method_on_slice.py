# expect: BT0425 9:5
from buildtile import simt
from buildtile.types import Slice, i32


@simt.kernel(block=256)
def k(counts: Slice[i32]):
    i = simt.index_1d()
    counts.atomic_add(0, 1)
