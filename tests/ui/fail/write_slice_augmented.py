# expect: BT0594 10:9
from buildtile import simt
from buildtile.types import Slice, f32


@simt.kernel(block=256)
def k(a: Slice[f32]):
    i = simt.index_1d()
    if i < len(a):
        a[i] += 1.0
