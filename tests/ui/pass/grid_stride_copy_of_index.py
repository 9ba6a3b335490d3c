from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, DisjointTensor, Slice, f32, i32


@simt.kernel(block=128)
def strided_total(x: Slice[f32], counter: AtomicSlice[i32], out: DisjointSlice[f32]):
    """The grid-stride idiom: a copy of the thread index that is advanced is a plain integer."""
    i = simt.index_1d()
    k = i
    acc = 0.0
    while k < len(x):
        acc += x[k]
        k += simt.grid_dim.x * 128
    counter.atomic_add(0, 1)
    seen = counter[0]            # a plain read of an AtomicSlice is a relaxed atomic load
    if i < len(out):
        out[i] = acc + f32(seen) * 0.0


@simt.kernel(block=(16, 16))
def transpose_in_place_free(a: DisjointSlice[f32], m: DisjointTensor[f32, 2]):
    row, col = simt.index_2d()
    m[col, row] = 1.0            # one consistent axis order: still each thread's own element
    m[col, row] = m[col, row] * 2.0
