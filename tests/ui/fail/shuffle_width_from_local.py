# expect: BT0308 9:54
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.kernel(block=128)
def k(out: DisjointSlice[f32]):
    segment = 16
    v = simt.shfl_down(f32(simt.lane_id()), 1, width=segment)
    out[simt.index_1d()] = v
