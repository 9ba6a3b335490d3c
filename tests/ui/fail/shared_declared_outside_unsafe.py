# expect: BT0133 8:5
from buildtile import simt
from buildtile.types import f32


@simt.kernel(block=64)
def k():
    buf = simt.shared_array(f32, 64)
    with simt.unsafe():
        buf[simt.thread_idx.x] = 1.0
