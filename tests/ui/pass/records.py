from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, bool_, f32, f64, i8, i64


@simt.record
class Particle:
    """A point mass: a C struct of 32 bytes (f64 `mass` at offset 16, `alive` at 24)."""

    x: f32
    y: f32
    vx: f32
    mass: f64
    alive: bool_


@simt.record
class Sample:
    tag: i8
    value: f64
    count: i64


@simt.kernel(block=128, requires=["len(p) == len(out)"])
def step(p: Slice[Particle], out: DisjointSlice[Particle], dt: f32):
    i = simt.index_1d()
    if i < len(out):
        out[i] = p[i]
        out[i].x = p[i].x + p[i].vx * dt
        if not p[i].alive:
            out[i].mass = 0.0


@simt.device
def weight(s: Slice[Sample], i: i64) -> f64:
    return s[i].value * s[i].count + s[i].tag


@simt.kernel(block=128, requires=["len(s) == len(total)"])
def weigh(s: Slice[Sample], total: DisjointSlice[f64]):
    i = simt.index_1d()
    if i < len(total):
        total[i] = weight(s, i)


@simt.kernel(block=(16, 16, 1))
def grid_copy(src: Tensor[Sample, 2], dst: DisjointTensor[Sample, 2]):
    row, col = simt.index_2d()
    if row < dst.shape[0] and col < dst.shape[1] and row < src.shape[0] and col < src.shape[1]:
        dst[row, col] = src[row, col]
        dst[row, col].count = src[row, col].count + 1
