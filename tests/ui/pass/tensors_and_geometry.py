from buildtile import simt
from buildtile.types import DisjointTensor, Tensor, bool_, f64, u32


@simt.kernel(block=(32, 8), requires=["a.shape[0] == out.shape[1]", "a.shape[1] == out.shape[0]"])
def transpose(a: Tensor[f64, 2], out: DisjointTensor[f64, 2]):
    # a permutation of the thread's own axes is still this thread's own element
    row, col = simt.index_2d()
    if row < a.shape[0] and col < a.shape[1]:
        out[col, row] = a[row, col]


@simt.kernel(block=(8, 8, 4))
def fill_volume(vol: DisjointTensor[u32, 3], flag: bool_):
    z, y, x = simt.index_3d()
    if z < vol.shape[0] and y < vol.shape[1] and x < vol.shape[2]:
        v = u32(simt.block_idx.x + simt.thread_idx.y)
        vol[z, y, x] = v if flag else u32(0)
