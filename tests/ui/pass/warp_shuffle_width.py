from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, f64, i32, i64, u32


@simt.kernel(block=128)
def segmented_scan(x: Slice[f32], out: DisjointSlice[f32]):
    """Inclusive prefix sums within each 16-lane segment of a warp (shfl_up with a width)."""
    i = simt.index_1d()
    v = x[i] if i < len(x) else 0.0
    lane = i32(simt.lane_id()) % 16
    offset = 1
    while offset < 16:
        up = simt.shfl_up(v, offset, width=16)
        if lane >= offset:
            v += up
        offset *= 2
    simt.syncwarp()
    if i < len(x):
        out[i] = v


@simt.kernel(block=64)
def masked_shuffles(x: Slice[f64], y: Slice[i64], out: DisjointSlice[f64], picks: DisjointSlice[i64],
                    mask: u32):
    """Every shuffle form with widths and masks: constant and run-time masks, 64-bit values."""
    i = simt.index_1d()
    v = x[i] if i < len(x) else 0.0
    w = y[i] if i < len(y) else 0
    a = simt.shfl_down(v, 1, width=8, mask=0xffffffff)
    b = simt.shfl_xor(v, 2, width=4)
    c = simt.shfl_idx(w, 0, width=32, mask=mask)
    d = simt.shfl_up(w, 1, mask=mask)
    simt.syncwarp(mask)
    simt.syncwarp(0xffffffff)
    hi = simt.mulhi(u32(i), u32(2654435761))
    if i < len(out):
        out[i] = a + b
        picks[i] = c + d + i64(hi)
