"""Memory and number kinds of the SIMT language: 2-D shared tiles, shared atomics, constant
arrays, warp shuffles within segments, 8/16-bit integers and counter-based random numbers."""

from buildtile import random, simt
from buildtile.types import (
    AtomicSlice, DisjointSlice, DisjointTensor, Slice, Tensor, f32, i8, i16, i32, u8, u16, u32, u64,
)

TILE = 16
BINS = 64
GRID_BINS = 8
#: coefficients of 1 + 2.5 x + 3 x^2 - 0.5 x^3, lowest power first
COEFFS = (1.0, 2.5, 3.0, -0.5)
SEGMENT = 16


@simt.kernel(block=(TILE, TILE))
def transpose_shared(a: Tensor[f32, 2], out: DisjointTensor[f32, 2]):
    """``out = a.T`` through a padded 2-D shared tile (no bank conflicts on the column read)."""
    row, col = simt.index_2d()
    with simt.unsafe():
        tile = simt.shared_array(f32, (TILE, TILE + 1))
        ty = simt.thread_idx.y
        tx = simt.thread_idx.x
        if row < a.shape[0] and col < a.shape[1]:
            tile[ty, tx] = a[row, col]
        simt.sync_threads()
        r = simt.block_idx.x * TILE + ty
        c = simt.block_idx.y * TILE + tx
        if r < out.shape[0] and c < out.shape[1]:
            out[r, c] = tile[tx, ty]


@simt.kernel(block=256)
def block_histogram(values: Slice[i32], bins: AtomicSlice[u32]):
    """Counts of values 0..BINS-1 (others ignored): shared atomics per block, then one global
    atomic per bin and block."""
    i = simt.index_1d()
    with simt.unsafe():
        counts = simt.shared_array(u32, BINS)
        t = simt.thread_idx.x
        if t < BINS:
            counts[t] = u32(0)
        simt.sync_threads()
        if i < len(values):
            counts.atomic_add(values[i], u32(1))   # an index outside 0..BINS-1 is skipped
        simt.sync_threads()
        if t < BINS and t < len(bins) and counts[t] != 0:
            bins.atomic_add(t, counts[t])


@simt.kernel(block=256)
def grid_histogram(xs: Slice[i32], ys: Slice[i32], bins: AtomicSlice[u32]):
    """Counts of points on a GRID_BINS x GRID_BINS grid (row y, column x) in a 2-D shared array;
    a point off the grid on either axis is skipped."""
    i = simt.index_1d()
    with simt.unsafe():
        counts = simt.shared_array(u32, (GRID_BINS, GRID_BINS))
        t = simt.thread_idx.x
        if t < GRID_BINS * GRID_BINS:
            counts[t // GRID_BINS, t % GRID_BINS] = u32(0)
        simt.sync_threads()
        if i < len(xs) and i < len(ys):
            counts.atomic_add((ys[i], xs[i]), u32(1))
        simt.sync_threads()
        if t < GRID_BINS * GRID_BINS:
            bins.atomic_add(t, counts[t // GRID_BINS, t % GRID_BINS])


@simt.kernel(block=256)
def polynomial(x: Slice[f32], y: DisjointSlice[f32]):
    """``y = sum(COEFFS[k] * x**k)`` by Horner's rule, reading the constant array at run time."""
    i = simt.index_1d()
    if i < len(x):
        acc = 0.0
        for k in range(len(COEFFS) - 1, -1, -1):
            acc = acc * x[i] + COEFFS[k]
        y[i] = acc


@simt.kernel(block=128)
def segmented_scan(x: Slice[f32], out: DisjointSlice[f32]):
    """Inclusive prefix sums within each run of SEGMENT elements (shfl_up with a width)."""
    i = simt.index_1d()
    v = x[i] if i < len(x) else 0.0
    lane = i32(simt.lane_id()) % SEGMENT
    offset = 1
    while offset < SEGMENT:
        up = simt.shfl_up(v, offset, width=SEGMENT)
        if lane >= offset:
            v += up
        offset *= 2
    simt.syncwarp()
    if i < len(x):
        out[i] = v


@simt.kernel(block=256)
def brighten(pixels: Slice[u8], out: DisjointSlice[u8], gain: u16, bias: i16):
    """``clip(pixels * gain // 16 + bias, 0, 255)`` in 16-bit arithmetic."""
    i = simt.index_1d()
    if i < len(pixels):
        scaled = u16(pixels[i]) * gain // 16
        shifted = i16(scaled) + bias
        out[i] = u8(max(min(shifted, 255), 0))


@simt.kernel(block=256)
def widen(a: Slice[i8], b: Slice[u16], wide: DisjointSlice[i32], low: DisjointSlice[i16]):
    """8-bit wrapping arithmetic, then sign and zero extension."""
    i = simt.index_1d()
    if i < len(a) and i < len(b):
        y: i8 = a[i] * 3 + 1
        wide[i] = i32(y) + i32(b[i])
        low[i] = i16(b[i]) >> 2


@simt.kernel(block=256)
def random_fill(uniform: DisjointSlice[f32], normal: DisjointSlice[f32], words: DisjointSlice[u32],
                seed: u64, offset: u64):
    """Draws at offsets ``offset + i`` of the stream ``seed``, and word 2 of Philox block
    ``(i, counter 3)``."""
    i = simt.index_1d()
    if i < len(uniform):
        uniform[i] = random.uniform(seed, offset + u64(i))
        if i < len(normal):
            normal[i] = random.normal(seed, offset + u64(i))
        if i < len(words):
            words[i] = random.philox(seed, i, 3, 2)
