from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32, i32, i64, u32

TILE = 16


@simt.kernel(block=(TILE, TILE))
def transpose(a: Tensor[f32, 2], out: DisjointTensor[f32, 2]):
    """Through a padded 2-D shared tile: reads and writes both coalesced."""
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


@simt.kernel(block=(8, 4, 2))
def cube_sums(x: Slice[f32], sums: DisjointSlice[f32]):
    """A 3-D shared array, summed along its last axis by one thread per (z, y)."""
    z, y, i = simt.index_3d()
    with simt.unsafe():
        cube = simt.shared_array(f32, (2, 4, 8))
        tz = simt.thread_idx.z
        ty = simt.thread_idx.y
        tx = simt.thread_idx.x
        cube[tz, ty, tx] = x[i] if i < len(x) else 0.0
        simt.sync_threads()
        if tx == 0:
            s = 0.0
            for k in range(8):
                s += cube[tz, ty, k]
            if z * len(cube) + y < len(sums):
                sums[z * len(cube) + y] = s


@simt.kernel(block=256)
def shared_histogram(values: Slice[i32], bins: DisjointSlice[u32], lo: DisjointSlice[i32], hi: DisjointSlice[i64]):
    """Per-block histogram in shared memory with shared atomics, then one plain write per bin."""
    i = simt.index_1d()
    with simt.unsafe():
        counts = simt.shared_array(u32, 64)
        extremes = simt.shared_array(i32, (2, 1))
        wide = simt.shared_array(i64, 1)
        last = simt.shared_array(f32, (1, 1))
        t = simt.thread_idx.x
        if t < 64:
            counts[t] = u32(0)
        if t == 0:
            extremes[0, 0] = 2147483647
            extremes[1, 0] = -2147483648
            wide[0] = 0
        simt.sync_threads()
        if i < len(values):
            v = values[i]
            counts.atomic_add(v % 64, u32(1))
            extremes.atomic_min((0, 0), v)
            extremes.atomic_max((1, 0), v)
            wide.atomic_add(0, i64(v))
            last.atomic_exchange((0, 0), f32(v))
            last.atomic_add((0, 0), 0.5)
            extremes.atomic_cas((1, 0), -1, -1)
        simt.sync_threads()
        if t < 64:
            bins[simt.block_idx.x * 64 + t] = counts[t]
        if t == 0:
            lo[simt.block_idx.x] = extremes[0, 0]
            hi[simt.block_idx.x] = wide[0]
