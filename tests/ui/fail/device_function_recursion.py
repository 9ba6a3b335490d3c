# expect: BT0200 9:20
from buildtile import simt
from buildtile.types import DisjointSlice, i64


@simt.device
def fact(n: i64) -> i64:
    if n > 1:
        return n * fact(n - 1)
    return 1


@simt.kernel(block=64)
def k(out: DisjointSlice[i64]):
    i = simt.index_1d()
    out[i] = fact(i)
