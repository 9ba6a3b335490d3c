from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=128, dynamic_shared=128 * 4)
def reverse_block(x: Slice[f32], out: DisjointSlice[f32]):
    """Each block reverses its chunk through dynamic shared memory (sized at launch)."""
    i = simt.index_1d()
    t = simt.thread_idx.x
    with simt.unsafe():
        stage = simt.dynamic_shared_array(f32)
        if t < len(stage):
            stage[t] = x[i] if i < len(x) else 0.0
        simt.sync_threads()
        if i < len(out) and 127 - t < len(stage):
            out[i] = stage[127 - t]
