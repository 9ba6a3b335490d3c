"""numba-cuda's Monte Carlo estimate of pi with its random-number library: each thread draws
``iterations`` points in the unit square and writes 4 * (the share inside the quarter disc). numba
keeps per-thread xoroshiro128+ states; buildtile.random is counter based, so each draw is
addressed by (seed, offset) instead."""

from buildtile import random, simt
from buildtile.types import DisjointSlice, f32, i32, u64


@simt.kernel(block=64)
def compute_pi(seed: u64, iterations: i32, out: DisjointSlice[f32]):
    thread_id = simt.grid(1)
    inside = 0
    for i in range(iterations):
        draw = u64(thread_id) * u64(2 * iterations) + u64(2 * i)
        x = random.uniform(seed, draw)
        y = random.uniform(seed, draw + u64(1))
        if x * x + y * y <= 1.0:
            inside += 1
    out[thread_id] = 4.0 * inside / iterations
