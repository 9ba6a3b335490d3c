# expect: BT0308 14:13 BT0308 15:11 BT0308 16:17 BT0308 18:5 BT0425 26:18 BT0308 33:9 BT0308 41:18 BT0425 48:18 BT0308 52:23 BT0499 60:13 BT0308 68:22
from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, Slice, f32, f64, i32


@simt.record
class Point:
    x: f32
    y: f32


@simt.record
class Body:
    centre: Point
    path: Slice[f32]
    mass: f64 = 1.0

    def weight(self):
        return self.mass


@simt.kernel(block=128, requires=["len(p) == len(out)"])
def unknown_field(p: Slice[Point], out: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = p[i].z


@simt.kernel(block=128, requires=["len(p) == len(out)"])
def record_in_a_name(p: Slice[Point], out: DisjointSlice[Point]):
    i = simt.index_1d()
    if i < len(out):
        q = p[i]
        out[i] = q


@simt.kernel(block=128, requires=["len(p) == len(out)"])
def field_into_element(p: Slice[Point], out: DisjointSlice[Point]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = p[i].x


@simt.kernel(block=128)
def field_of_a_scalar_array(a: Slice[f32], out: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(out) and i < len(a):
        out[i] = a[i].x


@simt.kernel(block=128)
def atomic_records(p: AtomicSlice[Point]):
    i = simt.index_1d()


@simt.kernel(block=128, requires=["len(p) == len(out)"])
def field_write_not_own(p: Slice[Point], out: DisjointSlice[Point]):
    i = simt.index_1d()
    if i + 1 < len(out):
        out[i + 1].x = p[i].x



@simt.kernel(block=128, requires=["len(p) == len(out)"])
def cast_of_a_record(p: Slice[Point], out: DisjointSlice[f32]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = f32(p[i])
