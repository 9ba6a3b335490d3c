from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, Slice, Tensor, f32, i32, i64, u32


@simt.device
def minmax(a: Slice[f32], i: i64) -> tuple[f32, f32]:
    if i + 1 < len(a):
        x, y = a[i], a[i + 1]
        if x > y:
            x, y = y, x
        return x, y
    return a[i], a[i]


@simt.device
def sign(v: f32) -> i32:
    if v > 0.0:
        return 1
    elif v < 0.0:
        return -1
    else:
        return 0


@simt.device
def count(bins: AtomicSlice[u32], k: i64):
    bins.atomic_add(k, 1)


@simt.device
def total(m: Tensor[f32, 2], row: i64) -> f32:
    s = 0.0
    for c in range(m.shape[1]):
        s += m[row, c]
    return s


@simt.kernel(block=128)
def k(a: Slice[f32], m: Tensor[f32, 2], lo: DisjointSlice[f32], hi: DisjointSlice[f32], s: DisjointSlice[i32],
      t: DisjointSlice[f32], bins: AtomicSlice[u32]):
    i = simt.index_1d()
    if i < len(a) and i < len(lo) and i < len(hi) and i < len(s):
        x, y = minmax(a, i)
        lo[i] = x
        hi[i] = y
        s[i] = sign(a[i])
        count(bins, 0)
    if i < m.shape[0] and i < len(t):
        t[i] = total(m, i)
