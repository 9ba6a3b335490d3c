# expect: BT0133 10:5
from buildtile import simt
from buildtile.types import f32


@simt.kernel(block=64)
def k():
    with simt.unsafe():
        buf = simt.shared_array(f32, 64)
    buf[simt.thread_idx.x] = 0.0
