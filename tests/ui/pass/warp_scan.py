from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i32, u32

WARP = 32


@simt.kernel(block=256, requires=["len(x) == len(out)"])
def warp_inclusive_scan(x: Slice[f32], out: DisjointSlice[f32]):
    """Inclusive prefix sum within each warp (Hillis-Steele over shuffles)."""
    i = simt.index_1d()
    lane = i32(simt.lane_id())
    v = x[i] if i < len(x) else 0.0
    offset = 1
    while offset < WARP:
        up = simt.shfl_idx(v, lane - offset if lane >= offset else lane)
        if lane >= offset:
            v += up
        offset *= 2
    out[i] = v


@simt.kernel(block=256)
def warp_max(x: Slice[f32], out: DisjointSlice[f32]):
    """Butterfly all-reduce: every lane ends with the warp's maximum."""
    i = simt.index_1d()
    v = x[i] if i < len(x) else -3.0e38
    mask = 16
    while mask > 0:
        v = max(v, simt.shfl_xor(v, mask))
        mask >>= 1
    out[i] = v


@simt.kernel(block=128)
def warp_positive_count(x: Slice[i32], out: DisjointSlice[u32]):
    i = simt.index_1d()
    positive = i < len(x) and x[i] > 0
    mask = simt.ballot(positive)
    n = u32(0)
    m = mask
    while m != u32(0):
        n += m & u32(1)
        m = m >> u32(1)
    out[i] = n
