"""SIMT kernels that break, inside ``simt.unsafe()``, a rule the GPU does not check; the CPU
emulator reports each (tests/test_emulate_checks.py). And warp collectives over part of a warp,
which the emulator runs as a GPU does."""

from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, Slice, f32, i32, u32


@simt.kernel(block=64)
def read_past_end(x: Slice[f32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    with simt.unsafe():
        out[i] = x[i + 1]          # the last thread reads one element past the end of x


@simt.kernel(block=64)
def two_writers(out: DisjointSlice[f32]):
    i = simt.index_1d()
    with simt.unsafe():
        out[i // 2] = 1.0          # threads 2k and 2k + 1 both write element k


@simt.kernel(block=64)
def barrier_after_return(x: Slice[f32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    if simt.thread_idx.x >= 32:
        return                     # half the block leaves before the barrier
    with simt.unsafe():
        simt.sync_threads()
    out[i] = x[i]


@simt.kernel(block=64)
def reads_unwritten_shared(x: Slice[f32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    t = simt.thread_idx.x
    with simt.unsafe():
        stage = simt.shared_array(f32, 64)
        if t < 32:
            stage[t] = x[i]        # only the first warp stages its values
        simt.sync_threads()
        out[i] = stage[t]          # the second warp reads shared memory nobody wrote


@simt.kernel(block=64)
def well_behaved(x: Slice[f32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    t = simt.thread_idx.x
    with simt.unsafe():
        stage = simt.shared_array(f32, 64)
        stage[t] = x[i]
        simt.sync_threads()
        out[i] = stage[63 - t]


@simt.kernel(block=64, cooperative=True)
def grid_phases(x: Slice[f32], total: AtomicSlice[f32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    t = simt.thread_idx.x
    with simt.unsafe():
        stage = simt.shared_array(f32, 64)
        stage[t] = x[i] if i < len(x) else 0.0
        if i < len(x):
            total.atomic_add(0, x[i])
        simt.grid_sync()           # every block has added its share; each keeps its own shared stage
        if i < len(out):
            out[i] = stage[63 - t] + total[0]


@simt.kernel(block=64, cooperative=True)
def grid_sync_after_return(out: DisjointSlice[f32]):
    i = simt.index_1d()
    if simt.block_idx.x == 1:
        return                     # block 1 leaves: the others wait for it forever
    simt.grid_sync()
    if i < len(out):
        out[i] = 1.0


@simt.kernel(block=64)
def waits_for_each_other(x: Slice[f32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    v = x[i]
    with simt.unsafe():
        if simt.thread_idx.x < 16:
            v = simt.shfl_down(v, 1)   # a warp collective lanes 16-31 never reach: they wait below
        simt.sync_threads()
    out[i] = v


@simt.kernel(block=64)
def halves_shuffle_apart(x: Slice[f32], out: DisjointSlice[f32]):
    """Each half of a warp shuffles among itself, in its own branch, naming its lanes in `mask`."""
    i = simt.index_1d()
    v = x[i]
    if simt.lane_id() < 16:
        v += simt.shfl_xor(v, 1, mask=u32(0x0000FFFF))
    else:
        v -= simt.shfl_down(v, 2, mask=u32(0xFFFF0000))
    out[i] = v


@simt.kernel(block=64)
def first_lanes_scan(x: Slice[i32], out: DisjointSlice[i32]):
    """An inclusive scan over the first 8 lanes of each warp alone, while the other lanes wait at
    the block's barrier: they are not in the shuffles' mask."""
    i = simt.index_1d()
    v = x[i]
    if simt.lane_id() < 8:
        k = 1
        while k < 8:
            up = simt.shfl_up(v, i32(k), width=8, mask=u32(0xFF))
            if simt.lane_id() >= k:
                v += up
            k *= 2
        simt.syncwarp(u32(0xFF))
    with simt.unsafe():
        simt.sync_threads()
    out[i] = v
