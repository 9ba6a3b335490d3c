"""Bitonic sorting networks: CUDA samples' ``bitonicSortShared`` (each block sorts its
SHARED_SIZE_LIMIT keys, with their values, in shared memory; unsigned arithmetic throughout, the
``Comparator`` swap inlined) and the global-memory step of the classic numba-cuda port (one
compare-and-swap per thread, partner ``i ^ j``)."""

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, i64, u32

SHARED_SIZE_LIMIT = 1024


@simt.kernel(block=SHARED_SIZE_LIMIT // 2,
             requires=["len(d_src_key) == len(d_dst_key)", "len(d_src_val) == len(d_dst_key)",
                       "len(d_dst_val) == len(d_dst_key)", "len(d_dst_key) % SHARED_SIZE_LIMIT == 0"])
def bitonic_sort_shared(d_dst_key: DisjointSlice[u32], d_dst_val: DisjointSlice[u32], d_src_key: Slice[u32],
                        d_src_val: Slice[u32], dir: u32):
    """Sorts each SHARED_SIZE_LIMIT keys (and their values): ascending when dir is 1."""
    with simt.unsafe():
        s_key = simt.shared_array(u32, SHARED_SIZE_LIMIT)
        s_val = simt.shared_array(u32, SHARED_SIZE_LIMIT)
        tid = u32(simt.thread_idx.x)
        offset = u32(simt.block_idx.x) * SHARED_SIZE_LIMIT + tid
        s_key[tid] = d_src_key[offset]
        s_val[tid] = d_src_val[offset]
        s_key[tid + SHARED_SIZE_LIMIT // 2] = d_src_key[offset + SHARED_SIZE_LIMIT // 2]
        s_val[tid + SHARED_SIZE_LIMIT // 2] = d_src_val[offset + SHARED_SIZE_LIMIT // 2]
        size = u32(2)
        while size <= SHARED_SIZE_LIMIT:
            # the last merge of the block sorts in `dir`; the earlier ones alternate
            ddd = dir if size == SHARED_SIZE_LIMIT else dir ^ u32((tid & (size // 2)) != 0)
            stride = size // 2
            while stride > 0:
                simt.sync_threads()
                pos = 2 * tid - (tid & (stride - 1))
                a = s_key[pos]
                b = s_key[pos + stride]
                if (a > b) == (ddd != 0):
                    s_key[pos] = b
                    s_key[pos + stride] = a
                    t = s_val[pos]
                    s_val[pos] = s_val[pos + stride]
                    s_val[pos + stride] = t
                stride >>= 1
            size <<= 1
        simt.sync_threads()
        d_dst_key[offset] = s_key[tid]
        d_dst_val[offset] = s_val[tid]
        d_dst_key[offset + SHARED_SIZE_LIMIT // 2] = s_key[tid + SHARED_SIZE_LIMIT // 2]
        d_dst_val[offset + SHARED_SIZE_LIMIT // 2] = s_val[tid + SHARED_SIZE_LIMIT // 2]


@simt.kernel(block=256)
def bitonic_step(a: DisjointSlice[u32], j: u32, k: u32):
    """One step of the network over all of `a` (a power of two long): thread i compares with i ^ j."""
    i = u32(simt.index_1d())
    ixj = i ^ j
    if ixj > i and i64(ixj) < len(a):
        with simt.unsafe():
            ascending = (i & k) == 0
            if (a[i] > a[ixj]) == ascending:
                t = a[i]
                a[i] = a[ixj]
                a[ixj] = t
