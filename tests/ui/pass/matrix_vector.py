from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32, f64


@simt.kernel(block=128, requires=["a.shape[1] == len(x)", "a.shape[0] == len(y)"])
def matvec(a: Tensor[f32, 2], x: Slice[f32], y: DisjointSlice[f32]):
    """y = A @ x, one row per thread, accumulated in f64."""
    row = simt.index_1d()
    if row < a.shape[0]:
        acc = f64(0.0)
        for k in range(a.shape[1]):
            acc += f64(a[row, k]) * f64(x[k])
        y[row] = f32(acc)


@simt.kernel(block=(16, 16), requires=["a.shape[0] == out.shape[0]", "a.shape[1] == out.shape[1]"])
def add_row_bias(a: Tensor[f32, 2], bias: Slice[f32], out: DisjointTensor[f32, 2]):
    row, col = simt.index_2d()
    if row < out.shape[0] and col < out.shape[1] and col < len(bias):
        out[row, col] = a[row, col] + bias[col]
