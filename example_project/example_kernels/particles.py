"""Particles as records: one C struct per particle, moved in place by a time step, and split
into arrays of their fields (an array of structs into a struct of arrays).

From Python the particles are a NumPy structured array of ``record_dtype(Particle)`` (copied
to the GPU as a DeviceArray) or their bytes as a uint8 tensor of shape (n, 32); from C and
C++ they are ``example_kernels_Particle`` structs (example_kernels/kernels.h).
"""

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, f64, i32

#: metres per second squared, downwards (along -y)
GRAVITY = 9.81


@simt.record
class Particle:
    """32 bytes: four f32 at offsets 0 to 12, `mass` at 16, `bounces` at 24, then 4 of padding."""

    x: f32
    y: f32
    vx: f32
    vy: f32
    mass: f64
    bounces: i32


@simt.kernel(block=256)
def advance(p: DisjointSlice[Particle], dt: f32, floor: f32):
    """One explicit Euler step under gravity. A particle that would end below ``floor`` is
    reflected above it, its vertical velocity reversed, and its bounce counted."""
    i = simt.index_1d()
    if i < len(p):
        vy = p[i].vy - GRAVITY * dt
        y = p[i].y + vy * dt
        p[i].x = p[i].x + p[i].vx * dt
        if y < floor:
            p[i].y = floor + (floor - y)
            p[i].vy = -vy
            p[i].bounces = p[i].bounces + 1
        else:
            p[i].y = y
            p[i].vy = vy


@simt.kernel(block=256, requires=["len(p) == len(x)", "len(p) == len(y)", "len(p) == len(energy)"])
def to_columns(p: Slice[Particle], x: DisjointSlice[f32], y: DisjointSlice[f32], energy: DisjointSlice[f64]):
    """The positions as two arrays, and each particle's kinetic energy, m (vx^2 + vy^2) / 2."""
    i = simt.index_1d()
    if i < len(p):
        x[i] = p[i].x
        y[i] = p[i].y
        speed2 = f64(p[i].vx) * f64(p[i].vx) + f64(p[i].vy) * f64(p[i].vy)
        energy[i] = 0.5 * p[i].mass * speed2
