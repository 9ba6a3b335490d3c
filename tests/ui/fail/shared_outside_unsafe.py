# expect: BT0133 8:5 BT0133 9:5
from buildtile import simt
from buildtile.types import f32


@simt.kernel(block=64)
def k():
    buf = simt.shared_array(f32, 64)
    buf[simt.thread_idx.x] = 1.0
