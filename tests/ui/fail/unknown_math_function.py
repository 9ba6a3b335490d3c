# expect: BT0425 11:12
from buildtile import simt
import math

from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=256)
def k(x: Slice[f32], c: DisjointSlice[f32]):
    i = simt.index_1d()
    c[i] = math.lgamma(x[i])
