from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32, i32, i64


@simt.kernel(block=256)
def scale_while(a: Slice[f32], c: DisjointSlice[f32], s: f32):
    i = simt.index_1d()
    while i < len(c):
        c[i] = a[i] * s
        i += simt.grid_dim.x * simt.block_dim.x


@simt.kernel(block=256)
def scale_range(a: Slice[f32], c: DisjointSlice[f32], s: f32):
    for i in range(simt.grid(1), len(c), simt.gridsize(1)):
        c[i] = a[i] * s


@simt.kernel(block=128)
def scale_named_stride(a: Slice[f32], c: DisjointSlice[f32], n: i32):
    start = simt.thread_idx.x + simt.block_idx.x * simt.block_dim.x
    stride = simt.block_dim.x * simt.grid_dim.x
    for i in range(start, n, stride):
        if i < len(c):
            c[i] = a[i] + 1.0
