# expect: BT0499 11:13
from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32


@simt.kernel(block=128)
def k(x: Slice[f32], out: DisjointSlice[f32]):
    tid = simt.block_dim.x * simt.block_idx.x + simt.thread_idx.x
    opt = tid
    while opt < len(out):
        out[opt] = x[opt]
        opt += simt.block_dim.x
