# expect: BT0200 8:5
from buildtile import simt
from buildtile.types import DisjointSlice, f32


@simt.device
def wait_for_grid(v: f32) -> f32:
    simt.grid_sync()
    return v


@simt.kernel(block=256, cooperative=True)
def k(out: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = wait_for_grid(1.0)
