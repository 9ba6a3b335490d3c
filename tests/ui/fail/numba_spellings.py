# expect: BT0425 12:9 BT0425 13:5 BT0425 14:5 BT0425 15:14
from numba import cuda
import numpy as np

from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, Slice, f32, u32


@simt.kernel(block=128)
def k(x: Slice[f32], bins: AtomicSlice[u32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    t = cuda.threadIdx.x
    cuda.syncthreads()
    cuda.atomic.add(bins, np.int32(x[i]), 1)
    out[i] = np.sqrt(x[i]) * 2.0
