from buildtile import simt
from buildtile.types import DisjointSlice, SharedArray, Slice, f32, i64, u32

BLOCK = 128


@simt.device
def tree_sum(buf: SharedArray[f32], t: i64) -> f32:
    """The sum of a block's values in shared memory, by halving (every thread calls it)."""
    with simt.unsafe():
        step = len(buf) // 2
        while step > 0:
            if t < step:
                buf[t] += buf[t + step]
            simt.sync_threads()
            step //= 2
        return buf[0]


@simt.device
def row_max(tile: SharedArray[f32, 2], row: i64) -> tuple[f32, i64]:
    """The largest value of a row of a 2-D shared tile, and its column; returns from two places."""
    with simt.unsafe():
        best = tile[row, 0]
        at = i64(0)
        for c in range(1, 4):
            if tile[row, c] > best:
                best = tile[row, c]
                at = i64(c)
        if at == 0:
            return best, i64(0)
        return best, at


@simt.device
def bump(bins: SharedArray[u32], k: i64):
    with simt.unsafe():
        bins.atomic_add(k % 8, 1)


@simt.kernel(block=BLOCK)
def k(x: Slice[f32], sums: DisjointSlice[f32], best: DisjointSlice[f32], col: DisjointSlice[i64],
      counts: DisjointSlice[u32]):
    i = simt.index_1d()
    t = simt.thread_idx.x
    with simt.unsafe():
        buf = simt.shared_array(f32, BLOCK)
        tile = simt.shared_array(f32, (BLOCK // 4, 4))
        bins = simt.shared_array(u32, 8)
        v = x[i] if i < len(x) else 0.0
        buf[t] = v
        tile[t // 4, t % 4] = v
        if t < 8:
            bins[t] = 0
        simt.sync_threads()
        bump(bins, t)
        total = tree_sum(buf, t)
        m, c = row_max(tile, t // 4)
        simt.sync_threads()
        if t == 0 and simt.block_idx.x < len(sums):
            sums[simt.block_idx.x] = total
        if t < 8 and simt.block_idx.x * 8 + t < len(counts):
            counts[simt.block_idx.x * 8 + t] = bins[t]
    if i < len(best) and i < len(col):
        best[i] = m
        col[i] = c
