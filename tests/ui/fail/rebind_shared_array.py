# expect: BT0384 10:9
from buildtile import simt
from buildtile.types import f32


@simt.kernel(block=64)
def k():
    with simt.unsafe():
        buf = simt.shared_array(f32, 64)
        buf = 0.0
