"""The all-pairs n-body force kernel of CUDA samples' ``nbody`` (GPU Gems 3, chapter 31): each
block stages a tile of body positions in shared memory, each thread sums its body's
accelerations over the tile (``bodyBodyInteraction`` with ``rsqrtf``)."""

import math

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32

P = 64
SOFTENING_SQUARED = 0.01


@simt.device
def body_body_interaction(xi: f32, yi: f32, zi: f32, xj: f32, yj: f32, zj: f32, mj: f32,
                          ax: f32, ay: f32, az: f32) -> tuple[f32, f32, f32]:
    rx = xj - xi
    ry = yj - yi
    rz = zj - zi
    dist_sqr = rx * rx + ry * ry + rz * rz + SOFTENING_SQUARED
    inv_dist = math.rsqrt(dist_sqr)
    inv_dist_cube = inv_dist * inv_dist * inv_dist
    s = mj * inv_dist_cube
    return ax + rx * s, ay + ry * s, az + rz * s


@simt.kernel(block=P, requires=["len(y) == len(x)", "len(z) == len(x)", "len(mass) == len(x)",
                                "len(accel_x) == len(x)", "len(accel_y) == len(x)", "len(accel_z) == len(x)"])
def integrate_forces(x: Slice[f32], y: Slice[f32], z: Slice[f32], mass: Slice[f32],
                     accel_x: DisjointSlice[f32], accel_y: DisjointSlice[f32], accel_z: DisjointSlice[f32]):
    gtid = simt.index_1d()
    n = len(x)
    xi = x[gtid] if gtid < n else 0.0
    yi = y[gtid] if gtid < n else 0.0
    zi = z[gtid] if gtid < n else 0.0
    ax = f32(0.0)
    ay = f32(0.0)
    az = f32(0.0)
    with simt.unsafe():
        sh = simt.shared_array(f32, (4, P))
        tile = 0
        while tile * P < n:
            idx = tile * P + simt.thread_idx.x
            sh[0, simt.thread_idx.x] = x[idx] if idx < n else 0.0
            sh[1, simt.thread_idx.x] = y[idx] if idx < n else 0.0
            sh[2, simt.thread_idx.x] = z[idx] if idx < n else 0.0
            sh[3, simt.thread_idx.x] = mass[idx] if idx < n else 0.0   # padding bodies weigh nothing
            simt.sync_threads()
            for j in range(P):
                ax, ay, az = body_body_interaction(xi, yi, zi, sh[0, j], sh[1, j], sh[2, j], sh[3, j], ax, ay, az)
            simt.sync_threads()
            tile += 1
    if gtid < n:
        accel_x[gtid] = ax
        accel_y[gtid] = ay
        accel_z[gtid] = az
