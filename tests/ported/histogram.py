"""Histograms: CUDA samples' ``histogram256`` (a per-block histogram in shared memory, merged into
the global one with atomics) and the numba-cuda tutorial's float histogram (global atomics in a
grid-stride loop)."""

from buildtile import simt
from buildtile.types import AtomicSlice, Slice, f32, i32, u8, u32

BIN_COUNT = 256
THREADS = 192


@simt.kernel(block=THREADS, requires=["len(d_histogram) == BIN_COUNT"])
def histogram256(d_data: Slice[u8], d_histogram: AtomicSlice[u32]):
    """d_histogram[v] += how many bytes of d_data equal v."""
    with simt.unsafe():
        s_hist = simt.shared_array(u32, BIN_COUNT)
        for b in range(simt.thread_idx.x, BIN_COUNT, simt.block_dim.x):
            s_hist[b] = 0
        simt.sync_threads()
        for pos in range(simt.grid(1), len(d_data), simt.gridsize(1)):
            s_hist.atomic_add(d_data[pos], 1)
        simt.sync_threads()
        for b in range(simt.thread_idx.x, BIN_COUNT, simt.block_dim.x):
            d_histogram.atomic_add(b, s_hist[b])


@simt.kernel(block=128)
def float_histogram(x: Slice[f32], xmin: f32, xmax: f32, histogram_out: AtomicSlice[u32]):
    """histogram_out[k] += the values of x in the k-th of len(histogram_out) equal bins of [xmin, xmax)."""
    nbins = histogram_out.shape[0]
    bin_width = (xmax - xmin) / nbins
    start = simt.grid(1)
    stride = simt.gridsize(1)
    for i in range(start, x.shape[0], stride):
        bin_number = i32((x[i] - xmin) / bin_width)
        if bin_number >= 0 and bin_number < histogram_out.shape[0]:
            histogram_out.atomic_add(bin_number, 1)
