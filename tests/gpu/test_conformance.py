"""Cross-host conformance: every kernel of example_kernels, from Python and from C++, on the same inputs.

The test writes each job's inputs as raw little-endian files and a job list
(tests/conformance/host.cpp documents the format), launches every job from
Python (buildtile DeviceArrays: ``kernel[grid](...)``, ``kernel(...,
tile.partition(z, tile)).sync_on(0)``), and runs the C++ host
(tests/conformance, built with CMake against ``python -m example_kernels
--cmake-dir``) on the same files, which launches them through the typed
wrappers of example_kernels/kernels.hpp. Then, for every job:

- both hosts launched it (no refusal, no error);
- every array argument, inputs included, holds the same bytes in both hosts
  afterwards: the same images run on the same bytes with the same grid, so
  even floating-point results are bit-identical. The only atomics are
  histogram's u32 increments, whose sum does not depend on their order, and
  sum_total's f32 adds of small integers, exact in any order; the
  float reductions (block_sum, sum_partials, softmax_rows, the tile
  reductions) combine values in a fixed order of shuffles and shared memory,
  with no atomics, so they are deterministic too;
- the result agrees with NumPy (exactly where the arithmetic is exact, else
  within a tolerance for the rounding of fused multiply-adds, of f32 sums in
  another order, of f16/bf16 outputs).

Sizes are ragged (not multiples of blocks or tiles). Each job list covers
every kernel and every tile specialization of the package's manifest; a
kernel or specialization the manifest has and the jobs do not is a failure.

The hosts launch on the device under test while another device is current
where the machine has one: Python with another device's context current
(a launch must go to its arguments' device and leave the current context
alone), and the C++ host once from its main thread with the device current,
and once from a fresh thread that has no CUDA context (the C ABI must then
pick the arguments' device by itself; abi.h, step 5) while its main thread
has another device current. With two GPUs or more, mixing devices in one
launch must be refused with BT0308 by both hosts before anything runs.

Skipped without a GPU, CMake, a CUDA toolkit (the C++ host uses cudaMalloc),
or the installed example project (``pip install ./example_project``).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from emulated_packages import example_manifest_for_the_emulator

ROOT = Path(__file__).parents[2]
HOST_SOURCE = ROOT / "tests" / "conformance"
CMAKE = shutil.which("cmake")
PACKAGE = "example_kernels"


def _has_cuda_toolkit() -> bool:
    return bool(shutil.which("nvcc") or os.environ.get("CUDAToolkit_ROOT") or Path("/usr/local/cuda/bin/nvcc").exists())


def needs_hosts(test):
    """What a test that runs both hosts needs besides the package: a GPU, cmake, a CUDA toolkit."""
    for mark in (pytest.mark.gpu,
                 pytest.mark.skipif(CMAKE is None, reason="the C++ host is built with cmake"),
                 pytest.mark.skipif(not _has_cuda_toolkit(), reason="the C++ host needs a CUDA toolkit (cudart)"),
                 pytest.mark.skipif(sys.byteorder != "little", reason="the job files are little-endian")):
        test = mark(test)
    return test


# ----------------------------------------------------------------------------- jobs

@dataclass
class Array:
    """An array argument: its contents before the launch (bf16 as its uint16 bits), and its device
    (None: the device under test, which each host takes as a parameter)."""

    name: str
    data: np.ndarray
    dtype: str
    device: int | None = None

    @property
    def file(self) -> str:
        return f"{self.name}.bin"


@dataclass
class Scalar:
    name: str
    dtype: str              # "f32" (travels as a C99 hexadecimal float, exactly), "bool" (0 or 1) or an integer type
    value: float | int

    def text(self) -> str:
        return float(np.float32(self.value)).hex() if self.dtype == "f32" else str(int(self.value))

    def python(self):
        if self.dtype == "bool":
            return bool(self.value)
        return np.float32(self.value) if self.dtype == "f32" else int(self.value)


@dataclass
class Job:
    id: str
    kernel: str                          # "ops.vecadd", "tiles.add" (module within the package)
    args: list
    check: Callable[[dict], None]        # asserts the outputs (name -> array) against NumPy
    grid: tuple | None = None            # SIMT: (x, y, z) blocks
    tile: tuple | None = None            # Tile: the tile shape of the kernel's tile.Out parameter

    @property
    def covers(self) -> tuple[str, tuple | None]:
        """The manifest entry this job runs: (kernel, None) or (kernel, (tile shape,))."""
        return self.kernel, None if self.tile is None else (tuple(self.tile),)


_ABI_NUMPY = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64,
              "i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16,
              "i32": np.int32, "i64": np.int64, "u32": np.uint32, "u64": np.uint64, "complex64": np.complex64}


def poison(shape, dtype: str) -> np.ndarray:
    """All bytes 0xFF: NaN for every float type, -1 for signed integers; what a kernel must overwrite."""
    np_dtype = np.dtype(_ABI_NUMPY[dtype])
    count = math.prod(shape) if isinstance(shape, tuple) else shape
    return np.frombuffer(b"\xff" * (count * np_dtype.itemsize), np_dtype).reshape(shape).copy()


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounded to nearest even (finite inputs)."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def exact(name: str, want: np.ndarray) -> Callable[[dict], None]:
    def check(out: dict) -> None:
        np.testing.assert_array_equal(out[name], want, err_msg=f"`{name}`")
    return check


def close(name: str, want: np.ndarray, rtol: float, atol: float, decode=None) -> Callable[[dict], None]:
    def check(out: dict) -> None:
        got = out[name] if decode is None else decode(out[name])
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol, err_msg=f"`{name}`")
    return check


def all_of(*checks: Callable[[dict], None]) -> Callable[[dict], None]:
    def check(out: dict) -> None:
        for one in checks:
            one(out)
    return check


def collatz_reference(x: np.ndarray, limit: int) -> np.ndarray:
    n = x.copy()
    steps = np.zeros(x.shape, np.int32)
    active = (n != 1) & (steps < limit)
    while active.any():
        n[active] = np.where(n[active] % 2 == 0, n[active] // 2, 3 * n[active] + 1)
        steps[active] += 1
        active = (n != 1) & (steps < limit)
    return steps


def _grid3(grid) -> tuple[int, int, int]:
    grid = tuple(grid)
    return grid + (1,) * (3 - len(grid))


def make_jobs(seed: int = 2024, package: str = PACKAGE) -> list[Job]:
    """One job or more per kernel and per tile specialization of example_kernels (on the device under
    test), whose kernel modules come from ``package`` (the example project, or a build of it)."""
    memory, numbers, ops, particles, patterns = (importlib.import_module(f"{package}.{m}")
                                                 for m in ("memory", "numbers", "ops", "particles", "patterns"))
    from buildtile import random

    rng = np.random.default_rng(seed)

    def randn(shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def arr(name, data, dtype=None):
        dtype = dtype or {np.float32: "f32", np.float64: "f64", np.int32: "i32", np.int64: "i64",
                          np.uint32: "u32", np.float16: "f16", np.int8: "i8", np.uint8: "u8", np.int16: "i16",
                          np.uint16: "u16", np.complex64: "complex64"}[data.dtype.type]
        return Array(name, np.ascontiguousarray(data), dtype)

    jobs: list[Job] = []

    # --- SIMT: example_kernels.ops
    n = 100_003
    a, b = randn(n), randn(n)
    jobs.append(Job("ops.vecadd", "ops.vecadd", [arr("a", a), arr("b", b), arr("c", poison(n, "f32"))],
                    exact("c", a + b), grid=_grid3(ops.vecadd.grid_for(n))))
    alpha = np.float32(0.3)  # not a short binary fraction: the scalar's bits must travel exactly
    jobs.append(Job("ops.saxpy", "ops.saxpy",
                    [Scalar("alpha", "f32", alpha), arr("x", a), arr("y", b), arr("out", poison(n, "f32"))],
                    # alpha * x + y may be one fused multiply-add: one rounding apart from NumPy's
                    close("out", alpha.astype(np.float64) * a + b, 1e-6, 1e-6), grid=_grid3(ops.saxpy.grid_for(n))))
    rows, cols = 300, 517
    ma, mb = randn((rows, cols)), randn((rows, cols))
    jobs.append(Job("ops.matadd", "ops.matadd", [arr("a", ma), arr("b", mb), arr("c", poison((rows, cols), "f32"))],
                    exact("c", ma + mb), grid=_grid3(ops.matadd.grid_for(rows, cols))))
    m = 50_001
    coeffs = rng.standard_normal(6)
    x = rng.uniform(-2, 2, m)
    want = np.abs(np.polyval(coeffs, x))
    jobs.append(Job("ops.polyval_abs", "ops.polyval_abs",
                    [arr("coeffs", coeffs), arr("x", x), arr("y", poison(m, "f64"))],
                    close("y", want, 1e-12, 1e-12 * float(want.max())), grid=_grid3(ops.polyval_abs.grid_for(m))))
    m = 20_011
    start = rng.integers(1, 10**6, m, dtype=np.int64)
    jobs.append(Job("ops.collatz_steps", "ops.collatz_steps",
                    [arr("x", start), Scalar("limit", "i32", 300), arr("out", poison(m, "i32"))],
                    exact("out", collatz_reference(start, 300)), grid=_grid3(ops.collatz_steps.grid_for(m))))

    # --- SIMT: example_kernels.patterns
    blocks = -(-n // 256)
    jobs.append(Job("patterns.block_sum", "patterns.block_sum", [arr("x", a), arr("partial", poison(blocks, "f32"))],
                    close("partial", np.add.reduceat(a.astype(np.float64), np.arange(0, n, 256)), 1e-4, 1e-4),
                    grid=_grid3(patterns.block_sum.grid_for(n))))
    jobs.append(Job("patterns.transpose_tiled", "patterns.transpose_tiled",
                    [arr("a", ma), arr("out", poison((cols, rows), "f32"))], exact("out", ma.T),
                    grid=(-(-cols // 32), -(-rows // 32), 1)))   # one block per 32 x 32 tile of `a`
    bins = 257
    values = rng.integers(-3, bins + 3, n).astype(np.int32)     # some outside the bins: ignored
    inside = values[(values >= 0) & (values < bins)]
    jobs.append(Job("patterns.histogram", "patterns.histogram",
                    [arr("values", values), arr("bins", np.zeros(bins, np.uint32))],
                    exact("bins", np.bincount(inside, minlength=bins).astype(np.uint32)),
                    grid=_grid3(patterns.histogram.grid_for(n))))
    sx = randn((257, 1000), 4)
    e = np.exp(sx.astype(np.float64) - sx.max(axis=1, keepdims=True))
    jobs.append(Job("patterns.softmax_rows", "patterns.softmax_rows",
                    [arr("x", sx), arr("out", poison(sx.shape, "f32"))],
                    close("out", e / e.sum(axis=1, keepdims=True), 1e-5, 1e-7), grid=(257, 1, 1)))  # a block per row
    u = randn((17, 33, 65))
    lap = u.astype(np.float64).copy()
    inner = (slice(1, -1),) * 3
    lap[inner] = (u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1] + u[1:-1, :-2, 1:-1] + u[1:-1, 2:, 1:-1]
                  + u[1:-1, 1:-1, :-2] + u[1:-1, 1:-1, 2:] - 6.0 * u[inner])
    jobs.append(Job("patterns.laplacian_3d", "patterns.laplacian_3d", [arr("u", u), arr("out", poison(u.shape, "f32"))],
                    close("out", lap, 1e-5, 1e-5), grid=_grid3(patterns.laplacian_3d.grid_for(*u.shape))))
    parts = 7
    stride = parts * 256       # each block's threads stride over the whole input
    # small integers: every partial sum is exact in f32, so one element dropped or added shows
    whole = rng.integers(-8, 9, n).astype(np.float32)
    padded = np.zeros(-(-n // stride) * stride)
    padded[:n] = whole
    jobs.append(Job("patterns.sum_partials", "patterns.sum_partials",
                    [arr("x", whole), arr("partial", poison(parts, "f32"))],
                    exact("partial", padded.reshape(-1, parts, 256).sum(axis=(0, 2)).astype(np.float32)),
                    grid=(parts, 1, 1)))
    jobs.append(Job("patterns.sum_total", "patterns.sum_total",
                    [arr("x", whole), arr("total", np.zeros(1, np.float32))],
                    exact("total", np.array([whole.astype(np.float64).sum()], np.float32)), grid=(parts, 1, 1)))
    r = 65_536 + 17
    rx = randn(r)
    rpad = np.zeros(-(-r // 256) * 256, np.float32)
    rpad[:r] = rx
    jobs.append(Job("patterns.reverse_blocks", "patterns.reverse_blocks",
                    [arr("x", rx), arr("out", poison(r, "f32"))],
                    exact("out", rpad.reshape(-1, 256)[:, ::-1].reshape(-1)[:r]),
                    grid=_grid3(patterns.reverse_blocks.grid_for(r))))

    # --- SIMT: example_kernels.cooperative and example_kernels.numbers
    hist = rng.integers(-5, 70, n).astype(np.int32)    # some off the 61 bins: not counted
    counts = np.bincount(hist[(hist >= 0) & (hist < 61)], minlength=61).astype(np.uint32)
    jobs.append(Job("cooperative.normalized_histogram", "cooperative.normalized_histogram",
                    [arr("values", hist), arr("counts", np.zeros(61, np.uint32)), arr("freq", poison(61, "f32"))],
                    all_of(exact("counts", counts),
                           close("freq", counts.astype(np.float64) / n, 1e-6, 0.0)),
                    grid=(64, 1, 1)))   # fewer blocks than any device holds at once; grid-stride loops cover the rest
    z = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    theta = rng.uniform(-np.pi, np.pi, n).astype(np.float32)

    def rotated(out: dict, z=z, theta=theta) -> None:   # bound now: later jobs reuse the names
        np.testing.assert_allclose(out["out"], z * np.exp(1j * theta.astype(np.float64)), rtol=2e-5, atol=2e-6,
                                   err_msg="`out`")
    jobs.append(Job("numbers.rotate_phase", "numbers.rotate_phase",
                    [arr("z", z), arr("theta", theta), arr("out", poison(n, "complex64")),
                     arr("magnitude", poison(n, "f32"))],
                    all_of(rotated, close("magnitude", np.abs(z).astype(np.float64), 1e-6, 0.0)),
                    grid=_grid3(numbers.rotate_phase.grid_for(n))))

    # --- SIMT: example_kernels.particles, the records as their bytes (n, 32) in both hosts
    from buildtile.runtime import record_dtype

    particle = record_dtype(particles.Particle)
    m = 30_011
    swarm = np.zeros(m, particle)
    for field in ("x", "y", "vx", "vy"):
        swarm[field] = rng.uniform(-2, 2, m)
    swarm["mass"], swarm["bounces"] = rng.uniform(0.5, 4, m), rng.integers(0, 5, m)
    step, floor = np.float32(0.05), np.float32(-1.0)
    vy = swarm["vy"] - np.float32(particles.GRAVITY) * step
    swarm["y"][np.abs(swarm["y"] + vy * step - floor) < 1e-3] += 0.01   # no bounce decided by rounding
    y = swarm["y"] + vy * step
    below = y < floor
    moved = {"x": swarm["x"] + swarm["vx"] * step, "y": np.where(below, floor + (floor - y), y), "vx": swarm["vx"],
             "vy": np.where(below, -vy, vy), "mass": swarm["mass"], "bounces": swarm["bounces"] + below}

    def advanced(out: dict) -> None:
        got = out["p"].view(particle).reshape(m)
        for field, want in moved.items():
            np.testing.assert_allclose(got[field], want, rtol=1e-6, atol=1e-6, err_msg=f"`p.{field}`")
    as_bytes = swarm.view(np.uint8).reshape(m, particle.itemsize)
    jobs.append(Job("particles.advance", "particles.advance",
                    [arr("p", as_bytes), Scalar("dt", "f32", step), Scalar("floor", "f32", floor)],
                    advanced, grid=_grid3(particles.advance.grid_for(m))))
    speed2 = swarm["vx"].astype(np.float64) ** 2 + swarm["vy"].astype(np.float64) ** 2
    jobs.append(Job("particles.to_columns", "particles.to_columns",
                    [arr("p", as_bytes), arr("x", poison(m, "f32")), arr("y", poison(m, "f32")),
                     arr("energy", poison(m, "f64"))],
                    all_of(exact("x", swarm["x"]), exact("y", swarm["y"]),
                           close("energy", 0.5 * swarm["mass"] * speed2, 1e-12, 0.0)),
                    grid=_grid3(particles.to_columns.grid_for(m))))

    # --- SIMT: example_kernels.memory
    jobs.append(Job("memory.transpose_shared", "memory.transpose_shared",
                    [arr("a", ma), arr("out", poison((cols, rows), "f32"))], exact("out", ma.T),
                    grid=_grid3(memory.transpose_shared.grid_for(rows, cols))))
    hist = rng.integers(-5, memory.BINS + 5, n).astype(np.int32)    # some off the bins: skipped
    on_bins = hist[(hist >= 0) & (hist < memory.BINS)]
    jobs.append(Job("memory.block_histogram", "memory.block_histogram",
                    [arr("values", hist), arr("bins", np.zeros(memory.BINS, np.uint32))],
                    exact("bins", np.bincount(on_bins, minlength=memory.BINS).astype(np.uint32)),
                    grid=_grid3(memory.block_histogram.grid_for(n))))
    side = memory.GRID_BINS
    xs = rng.integers(-2, side + 2, n).astype(np.int32)
    ys = rng.integers(-2, side + 2, n).astype(np.int32)
    on_grid = (xs >= 0) & (xs < side) & (ys >= 0) & (ys < side)
    jobs.append(Job("memory.grid_histogram", "memory.grid_histogram",
                    [arr("xs", xs), arr("ys", ys), arr("bins", np.zeros(side * side, np.uint32))],
                    exact("bins", np.bincount(ys[on_grid] * side + xs[on_grid], minlength=side * side)
                          .astype(np.uint32)),
                    grid=_grid3(memory.grid_histogram.grid_for(n))))
    px = rng.uniform(-2, 2, n).astype(np.float32)
    jobs.append(Job("memory.polynomial", "memory.polynomial", [arr("x", px), arr("y", poison(n, "f32"))],
                    close("y", np.polynomial.polynomial.polyval(px.astype(np.float64), memory.COEFFS), 1e-5, 1e-5),
                    grid=_grid3(memory.polynomial.grid_for(n))))
    seg = memory.SEGMENT
    spad = np.zeros(-(-n // seg) * seg)
    spad[:n] = a
    jobs.append(Job("memory.segmented_scan", "memory.segmented_scan", [arr("x", a), arr("out", poison(n, "f32"))],
                    close("out", np.cumsum(spad.reshape(-1, seg), axis=1).reshape(-1)[:n], 1e-5, 1e-5),
                    grid=_grid3(memory.segmented_scan.grid_for(n))))
    pixels = rng.integers(0, 256, n).astype(np.uint8)
    gain, bias = 24, -40
    bright = np.clip((pixels.astype(np.int64) * gain // 16) + bias, 0, 255).astype(np.uint8)
    jobs.append(Job("memory.brighten", "memory.brighten",
                    [arr("pixels", pixels), arr("out", poison(n, "u8")), Scalar("gain", "u16", gain),
                     Scalar("bias", "i16", bias)],
                    exact("out", bright), grid=_grid3(memory.brighten.grid_for(n))))
    small = rng.integers(-128, 128, n).astype(np.int8)
    halves = rng.integers(0, 65536, n).astype(np.uint16)
    wrapped = ((small.astype(np.int64) * 3 + 1 + 128) % 256 - 128).astype(np.int32)   # i8 arithmetic wraps
    jobs.append(Job("memory.widen", "memory.widen",
                    [arr("a", small), arr("b", halves), arr("wide", poison(n, "i32")), arr("low", poison(n, "i16"))],
                    all_of(exact("wide", wrapped + halves.astype(np.int32)), exact("low", halves.astype(np.int16) >> 2)),
                    grid=_grid3(memory.widen.grid_for(n))))
    seed, offset = 0x0123456789ABCDEF, 2**32 - 7
    draws = np.uint64(offset) + np.arange(n, dtype=np.uint64)
    jobs.append(Job("memory.random_fill", "memory.random_fill",
                    [arr("uniform", poison(n, "f32")), arr("normal", poison(n, "f32")), arr("words", poison(n, "u32")),
                     Scalar("seed", "u64", seed), Scalar("offset", "u64", offset)],
                    all_of(exact("uniform", random.uniform(seed, draws)),
                           close("normal", random.normal(seed, draws).astype(np.float64), 2e-5, 2e-5),
                           exact("words", random.philox(seed, np.arange(n), 3, 2))),
                    grid=_grid3(memory.random_fill.grid_for(n))))

    # --- Tile: example_kernels.tiles, every specialization at least once
    for tile in (1024, 4096):
        jobs.append(Job(f"tiles.add.t{tile}", "tiles.add", [arr("x", a), arr("y", b), arr("z", poison(n, "f32"))],
                        exact("z", a + b), tile=(tile,)))
    for tile, shape in [((64, 64), (300, 513)), ((16, 256), (37, 1000))]:
        x, s, bias = randn(shape), randn(shape[1]), randn(shape[1])
        jobs.append(Job(f"tiles.scale_bias.t{tile[0]}x{tile[1]}", "tiles.scale_bias",
                        [arr("x", x), arr("scale", s), arr("bias", bias), arr("z", poison(shape, "f32"))],
                        close("z", x.astype(np.float64) * s + bias, 1e-6, 1e-6), tile=tile))
    # tiles spanning whole rows (one pass), and rows wider than a tile (statistics gathered over tiles)
    for tile, shape, suffix in [((1, 1024), (257, 1000), ""), ((1, 1024), (33, 5000), ".wide"),
                                ((1, 4096), (3, 2049), ""), ((4, 256), (1023, 200), ""),
                                ((4, 256), (9, 1000), ".wide"), ((1, 256), (5, 200), ""),
                                ((1, 256), (3, 700), ".wide"), ((4, 1024), (7, 1000), ""),
                                ((4, 1024), (6, 2500), ".wide")]:
        x = randn(shape, 4)
        e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
        jobs.append(Job(f"tiles.softmax.t{tile[0]}x{tile[1]}{suffix}", "tiles.softmax",
                        [arr("x", x), arr("z", poison(shape, "f32"))],
                        close("z", e / e.sum(axis=1, keepdims=True), 1e-5, 1e-7), tile=tile))
    eps = np.float32(1e-5)
    scale_x, scale_y = np.float32(1.5), np.float32(-0.25)
    jobs.append(Job("tiles.axpby.t1024", "tiles.axpby",
                    [arr("x", a), arr("y", b), Scalar("alpha", "f32", scale_x), Scalar("beta", "f32", scale_y),
                     arr("z", poison(n, "f32"))],
                    close("z", scale_x * a.astype(np.float64) + scale_y * b, 1e-6, 1e-6), tile=(1024,)))
    for tile, shape, suffix in [((1, 1024), (513, 1000), ""), ((1, 1024), (7, 4000), ".wide"),
                                ((4, 256), (1001, 256), ""), ((4, 256), (10, 1000), ".wide")]:
        x, w, bias = randn(shape), randn(shape[1]), randn(shape[1])
        x64 = x.astype(np.float64)
        mean = x64.mean(axis=1, keepdims=True)
        want = (x64 - mean) / np.sqrt(((x64 - mean) ** 2).mean(axis=1, keepdims=True) + float(eps)) * w + bias
        jobs.append(Job(f"tiles.layernorm.t{tile[0]}x{tile[1]}{suffix}", "tiles.layernorm",
                        [arr("x", x), arr("weight", w), arr("bias", bias), Scalar("eps", "f32", eps),
                         arr("z", poison(shape, "f32"))],
                        close("z", want, 1e-4, 1e-5), tile=tile))
    for tile, shape in [((64,), (1025, 33)), ((16,), (100, 4099))]:
        x = randn(shape)
        jobs.append(Job(f"tiles.row_sum.t{tile[0]}", "tiles.row_sum", [arr("x", x), arr("z", poison(shape[0], "f32"))],
                        close("z", x.astype(np.float64).sum(axis=1), 1e-4, 1e-4), tile=tile))
    for name, dtype in [("matmul_f16", "f16"), ("matmul_bf16", "bf16")]:
        for tile, (mm, nn, kk) in [((128, 128), (257, 136, 104)), ((64, 64), (70, 50, 45)),
                                   ((128, 256), (300, 1031, 333))]:
            fa, fb = randn((mm, kk)), randn((kk, nn))
            if dtype == "f16":
                da, db = fa.astype(np.float16), fb.astype(np.float16)
                va, vb, decode, eps_out = da.astype(np.float64), db.astype(np.float64), None, 2.0 ** -11
            else:
                da, db = bf16_bits(fa), bf16_bits(fb)
                va, vb, decode, eps_out = bf16_values(da), bf16_values(db), bf16_values, 2.0 ** -8
            want = va.astype(np.float64) @ vb.astype(np.float64)      # on the rounded inputs
            jobs.append(Job(f"tiles.{name}.t{tile[0]}x{tile[1]}", f"tiles.{name}",
                            [arr("a", da, dtype), arr("b", db, dtype), arr("c", poison((mm, nn), dtype), dtype)],
                            close("c", want, 2 * eps_out, 2 * eps_out * math.sqrt(kk), decode), tile=tile))
    # --- Tile: example_kernels.attention, each tile shape in bf16 (the C++ wrapper's dtype), causal or not
    for (rows, d), (seq_q, seq_k), causal in [((128, 64), (200, 300), True), ((128, 128), (130, 77), False),
                                              ((64, 64), (70, 150), False), ((64, 128), (100, 100), True)]:
        q, k, v = (bf16_bits(randn((1, 2, n, d))) for n in (seq_q, seq_k, seq_k))
        scale = np.float32(1 / math.sqrt(d))
        jobs.append(Job(f"attention.attention.t{rows}x{d}", "attention.attention",
                        [arr("q", q, "bf16"), arr("k", k, "bf16"), arr("v", v, "bf16"), Scalar("scale", "f32", scale),
                         Scalar("causal", "bool", causal), arr("out", poison((1, 2, seq_q, d), "bf16"), "bf16")],
                        close("out", attention_reference(q, k, v, float(scale), causal), 2e-2, 2e-2, bf16_values),
                        tile=(1, 1, rows, d)))
    # --- Tile: example_kernels.epilogues, each tile shape in both dtypes; K under one step of 64 and over it
    for dtype in ("bf16", "f16"):
        for tile, (mm, nn, kk) in [((128, 256), (300, 520, 200)), ((128, 128), (257, 136, 40)),
                                   ((64, 64), (70, 50, 45))]:
            fa, fb, fbias, fres = randn((mm, kk)), randn((kk, nn)), randn(nn), randn((mm, nn))
            if dtype == "f16":
                da, db, dbias, dres = (x.astype(np.float16) for x in (fa, fb, fbias, fres))
                decode, eps_out = None, 2.0 ** -11
                va, vb, vbias, vres = (x.astype(np.float64) for x in (da, db, dbias, dres))
            else:
                da, db, dbias, dres = (bf16_bits(x) for x in (fa, fb, fbias, fres))
                decode, eps_out = bf16_values, 2.0 ** -8
                va, vb, vbias, vres = (bf16_values(x).astype(np.float64) for x in (da, db, dbias, dres))
            product = va @ vb                                   # on the rounded inputs
            tol = (2 * eps_out, 2 * eps_out * math.sqrt(kk))
            pre = product + vbias
            gelu = pre * 0.5 * (1 + np.vectorize(math.erf)(pre / math.sqrt(2)))
            jobs.append(Job(f"epilogues.matmul_bias_gelu_{dtype}.t{tile[0]}x{tile[1]}",
                            f"epilogues.matmul_bias_gelu_{dtype}",
                            [arr("a", da, dtype), arr("b", db, dtype), arr("bias", dbias, dtype),
                             arr("c", poison((mm, nn), dtype), dtype)],
                            close("c", gelu, *tol, decode), tile=tile))
            alpha = np.float32(-1.5)
            jobs.append(Job(f"epilogues.matmul_residual_{dtype}.t{tile[0]}x{tile[1]}",
                            f"epilogues.matmul_residual_{dtype}",
                            [arr("a", da, dtype), arr("b", db, dtype), arr("residual", dres, dtype),
                             Scalar("alpha", "f32", alpha), arr("c", poison((mm, nn), dtype), dtype)],
                            close("c", float(alpha) * product + vres, *tol, decode), tile=tile))
    assert len({j.id for j in jobs}) == len(jobs), "job ids must be unique"
    return jobs


def attention_reference(q, k, v, scale: float, causal: bool) -> np.ndarray:
    """softmax(q k^T scale) v per (batch, head), in float64 on the bf16 inputs; causal: key j <= query i."""
    q, k, v = (bf16_values(t).astype(np.float64) for t in (q, k, v))
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("bhqk,bhkd->bhqd", p / p.sum(axis=-1, keepdims=True), v)


def manifest_entries(manifest: dict) -> set[tuple[str, tuple | None]]:
    """(kernel, None) per SIMT kernel and (kernel, tile shapes of its tile.Out parameters) per
    specialization of a Tile kernel, kernels named ``module.kernel`` within the package."""
    entries = set()
    for k in manifest["kernels"]:
        name = f"{k['module'].partition('.')[2]}.{k['name']}"
        if k.get("kind") == "tile":
            outs = [p["name"] for p in k["params"] if p["kind"] == "tile_out"]
            for spec in k["tile"]["specializations"]:
                entries.add((name, tuple(tuple(spec["tile_shapes"][o]) for o in outs)))
        else:
            entries.add((name, None))
    return entries


def write_jobs(directory: Path, jobs: list[Job]) -> Path:
    """The job file and every array's bytes, under ``directory``; returns the job file."""
    lines = []
    for job in jobs:
        how = f"grid {' '.join(map(str, job.grid))}" if job.tile is None else f"tile {' '.join(map(str, job.tile))}"
        lines.append(f"job {job.id} {job.kernel} {how}")
        for arg in job.args:
            if isinstance(arg, Array):
                rel = f"{job.id}.{arg.file}"
                (directory / rel).write_bytes(np.ascontiguousarray(arg.data).tobytes())  # little-endian hosts
                device = "@" if arg.device is None else arg.device
                lines.append(f"array {arg.name} {arg.dtype} {device} {arg.data.ndim} "
                             f"{' '.join(map(str, arg.data.shape))} {rel}")
            else:
                lines.append(f"scalar {arg.name} {arg.dtype} {arg.text()}")
        lines.append("end")
    path = directory / "jobs.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


# ----------------------------------------------------------------------------- the Python host

class Bf16Array:
    """A bf16 view of a DeviceArray of uint16 bits: NumPy has no bfloat16; the CUDA array interface
    spells it "<V2", which is how buildtile reads bf16 from any producer."""

    def __init__(self, bits) -> None:
        self.bits = bits
        self.shape = bits.shape

    @property
    def __cuda_array_interface__(self) -> dict:
        return {**self.bits.__cuda_array_interface__, "typestr": "<V2"}

    def to_numpy(self) -> np.ndarray:
        return self.bits.to_numpy()


def _params(manifest: dict, kernel: str) -> list[dict]:
    module, _, name = kernel.rpartition(".")
    record = next(k for k in manifest["kernels"] if k["module"] == f"{PACKAGE}.{module}" and k["name"] == name)
    return record["params"]


def _written(manifest: dict, kernel: str) -> set[str]:
    """The parameters a kernel writes (outputs and atomics)."""
    return {p["name"] for p in _params(manifest, kernel) if p["role"] != "in"}


def python_arrays(job: Job, device: int) -> dict:
    """A DeviceArray (bf16: a Bf16Array) per array argument, holding its data, on its device
    (``device`` unless the job says)."""
    from buildtile.runtime import DeviceArray

    arrays = {}
    for arg in job.args:
        if isinstance(arg, Array):
            device_array = DeviceArray.from_numpy(arg.data, device=device if arg.device is None else arg.device)
            arrays[arg.name] = Bf16Array(device_array) if arg.dtype == "bf16" else device_array
    return arrays


def python_call(job: Job, arrays: dict, manifest: dict) -> None:
    """Launch ``job`` from Python over ``arrays`` (SIMT: ``kernel[grid]``; Tile: the tile.Out
    parameter partitioned into the job's tile shape, ``.sync_on(0)``), on the legacy default stream."""
    from buildtile import tile

    module, _, name = job.kernel.rpartition(".")
    kernel = getattr(importlib.import_module(f"{PACKAGE}.{module}"), name)
    values = [arrays[a.name] if isinstance(a, Array) else a.python() for a in job.args]
    if job.tile is not None:
        out = next(k for k, p in enumerate(_params(manifest, job.kernel)) if p["kind"] == "tile_out")
        values[out] = tile.partition(values[out], list(job.tile))
        kernel(*values).sync_on(0)
    else:
        kernel[job.grid](*values)


def python_read(arrays: dict) -> dict[str, np.ndarray]:
    from buildtile.runtime import synchronize

    synchronize()
    return {name: array.to_numpy() for name, array in arrays.items()}


def device_count() -> int:
    from buildtile.runtime.driver import get_driver

    return get_driver().device_count()


def other_device(device: int) -> int | None:
    return next((d for d in range(device_count()) if d != device), None)


@contextmanager
def another_context_current(device: int):
    """Make another device's primary context current on this thread for the block (when the machine
    has another device); the launches in the block must leave it current."""
    from buildtile.runtime.driver import get_driver

    driver = get_driver()
    other = other_device(device)
    if other is None:
        yield None
        return
    cu = driver.cu
    ctx = driver.context(other)
    previous = driver.check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    driver.check(cu.cuCtxSetCurrent(ctx.handle), "cuCtxSetCurrent")
    try:
        yield other
        now = driver.check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        assert int(now) == ctx.handle_int, "a launch from Python changed the thread's current CUDA context"
    finally:
        driver.check(cu.cuCtxSetCurrent(previous), "cuCtxSetCurrent")


# ----------------------------------------------------------------------------- the C++ host

def _run(cmd, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], check=False, capture_output=True, text=True, **kwargs)


def _checked(cmd, **kwargs) -> str:
    result = _run(cmd, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def example():
    """(the manifest of the installed example_kernels, its path)."""
    pytest.importorskip(PACKAGE, reason="the example project is not installed (pip install ./example_project)")
    from buildtile.runtime.package import find_manifest

    path = find_manifest(f"{PACKAGE}.ops")
    return json.loads(path.read_text()), path


@pytest.fixture(scope="module")
def cpp_host(example, tmp_path_factory) -> Path:
    """tests/conformance built against the installed example_kernels' CMake package."""
    cmake_dir = _checked([sys.executable, "-m", PACKAGE, "--cmake-dir"]).strip()
    build = tmp_path_factory.mktemp("conformance-host")
    _checked([CMAKE, "-S", HOST_SOURCE, "-B", build, f"-Dexample_kernels_DIR={cmake_dir}",
              "-DCMAKE_BUILD_TYPE=Release"])
    _checked([CMAKE, "--build", build])
    return build / "conformance_host"


def cpp_run(exe: Path, jobs_file: Path, out: Path, *, device: int, launch_from: str = "main",
            current: int | None = None) -> dict[str, tuple[int, str]]:
    """Run the C++ host over ``jobs_file``; job id -> (status, message): 0 launched, else the BT
    code of the refusal (-1: a problem of the host or the job, -2: a CUDA error after the launch)."""
    out.mkdir()
    cmd = [exe, "--jobs", jobs_file, "--out", out, "--device", device, "--launch-from", launch_from]
    if current is not None:
        cmd += ["--current", current]
    result = _run(cmd, timeout=600)
    results = out / "results.txt"
    text = results.read_text() if results.exists() else ""
    assert result.returncode == 0, f"the C++ host exited with {result.returncode}:\n{result.stderr}\n{text}"
    outcomes = {}
    for line in text.splitlines():
        job_id, status, message = line.split("\t", 2)
        outcomes[job_id] = int(status), message.replace("\\n", "\n")
    return outcomes


def cpp_output(out: Path, job: Job, arg: Array) -> np.ndarray:
    data = (out / f"{job.id}.{arg.name}.bin").read_bytes()
    return np.frombuffer(data, arg.data.dtype).reshape(arg.data.shape)


def first_difference(a: np.ndarray, b: np.ndarray) -> str:
    """Where two same-shaped arrays differ bitwise: the count and the first flat index, with values."""
    ua, ub = a.reshape(-1).view(f"u{a.itemsize}"), b.reshape(-1).view(f"u{b.itemsize}")
    where = np.flatnonzero(ua != ub)
    k = int(where[0])
    return f"{where.size} of {a.size} elements, first at flat index {k}: {a.reshape(-1)[k]!r} vs {b.reshape(-1)[k]!r}"


# ----------------------------------------------------------------------------- the tests

@pytest.fixture
def example_for_coverage():
    """(manifest, its path) of the installed example_kernels; where it is not installed (CI), of the
    build of its sources that the emulated test cases share (the same kernels and specialisations,
    under another package name)."""
    if importlib.util.find_spec(PACKAGE) is not None:
        from buildtile.runtime.package import find_manifest

        path = find_manifest(f"{PACKAGE}.ops")
        return json.loads(path.read_text()), path
    return example_manifest_for_the_emulator()


def test_the_jobs_cover_every_kernel_and_specialization_of_the_manifest(example_for_coverage):
    """Runs without a GPU: the job list against the example package's manifest."""
    manifest, path = example_for_coverage
    covered = {job.covers for job in make_jobs(package=manifest["package"])}
    missing = manifest_entries(manifest) - covered
    assert not missing, (f"the conformance jobs do not cover {sorted(missing, key=str)} of {path}: add jobs "
                         "(tests/gpu/test_conformance.py) and runners (tests/conformance/host.cpp) for them")
    assert covered <= manifest_entries(manifest), "jobs for kernels or tile shapes the package does not have"


@needs_hosts
@pytest.mark.parametrize("device", [0, 1])
def test_every_kernel_gives_the_same_bytes_from_python_and_cpp(example, cpp_host, tmp_path, device):
    count = device_count()
    if device >= count:
        from gpu_gate import not_this_hardware

        not_this_hardware(f"cuda:{device} needs a machine with {device + 1} GPUs; this one has {count}")
    manifest, path = example
    listed = set(_checked([cpp_host, "--list"]).split())
    assert {kernel for kernel, _ in manifest_entries(manifest)} <= listed, "the C++ host lacks runners"
    jobs = make_jobs()
    inputs = tmp_path / "in"
    inputs.mkdir()
    jobs_file = write_jobs(inputs, jobs)

    failures: list[str] = []
    python: dict[str, dict[str, np.ndarray]] = {}
    with another_context_current(device) as other:
        for job in jobs:
            try:
                arrays = python_arrays(job, device)
                python_call(job, arrays, manifest)
                python[job.id] = python_read(arrays)
            except Exception as exc:  # noqa: BLE001 (reported with every other failure below)
                failures.append(f"{job.id}: the Python host raised {type(exc).__name__}: {exc}")
    agreed = set(python)
    elsewhere = device if other is None else other
    runs = [(f"C++ (main thread, cuda:{device} current)", {"launch_from": "main"}),
            (f"C++ (a thread without a CUDA context; cuda:{elsewhere} current on the main thread)",
             {"launch_from": "thread", "current": other})]
    if other is not None:  # the arguments' device left elsewhere: the shim launches on theirs all the same
        runs.append((f"C++ (main thread, cuda:{other} current)", {"launch_from": "main", "current": other}))
    for k, (label, how) in enumerate(runs):
        out = tmp_path / f"out{k}"
        outcomes = cpp_run(cpp_host, jobs_file, out, device=device, **how)
        for job in jobs:
            status, message = outcomes.get(job.id, (None, "not run (an earlier job failed)"))
            if status != 0:
                failures.append(f"{job.id}: {label}: status {status}: {message}")
                agreed.discard(job.id)
                continue
            if job.id not in python:
                continue
            for arg in (a for a in job.args if isinstance(a, Array)):
                got, want = cpp_output(out, job, arg), python[job.id][arg.name]
                if got.tobytes() != np.ascontiguousarray(want).tobytes():
                    failures.append(f"{job.id}: `{arg.name}` differs between Python and {label} at "
                                    f"{first_difference(want, got)}")
                    agreed.discard(job.id)
    for job in jobs:  # against NumPy (the C++ host's bytes are the same, or failed above)
        if job.id not in python:
            continue
        try:
            job.check(python[job.id])
            for arg in job.args:
                if isinstance(arg, Array) and arg.name not in _written(manifest, job.kernel):
                    np.testing.assert_array_equal(python[job.id][arg.name], arg.data, err_msg=f"input `{arg.name}`")
        except AssertionError as exc:
            failures.append(f"{job.id}: Python and NumPy disagree: {exc}")
            agreed.discard(job.id)
    assert not failures, f"{len(failures)} failure(s) on cuda:{device}:\n" + "\n".join(failures)
    missing = manifest_entries(manifest) - {job.covers for job in jobs if job.id in agreed}
    assert not missing, f"not covered by the conformance run: {sorted(missing, key=str)} ({path})"


def mixed_jobs() -> list[Job]:
    """Launches with one argument on cuda:1 and the others on cuda:0 (their `check`: the written
    argument still holds what was uploaded)."""
    n, rows, cols = 10_007, 100, 70
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((2, n)).astype(np.float32)
    m = rng.standard_normal((rows, cols)).astype(np.float32)
    values = (np.arange(n) % 16).astype(np.int32)
    return [
        Job("mixed.vecadd", "ops.vecadd",
            [Array("a", x, "f32", 0), Array("b", y, "f32", 1), Array("c", poison(n, "f32"), "f32", 0)],
            exact("c", poison(n, "f32")), grid=(-(-n // 256), 1, 1)),
        Job("mixed.matadd", "ops.matadd",
            [Array("a", m, "f32", 0), Array("b", m, "f32", 0), Array("c", poison((rows, cols), "f32"), "f32", 1)],
            exact("c", poison((rows, cols), "f32")), grid=(-(-cols // 16), -(-rows // 16), 1)),
        Job("mixed.histogram", "patterns.histogram",
            [Array("values", values, "i32", 0), Array("bins", np.zeros(16, np.uint32), "u32", 1)],
            exact("bins", np.zeros(16, np.uint32)), grid=(-(-n // 256), 1, 1)),
        Job("mixed.tiles.add", "tiles.add",
            [Array("x", x, "f32", 0), Array("y", y, "f32", 0), Array("z", poison(n, "f32"), "f32", 1)],
            exact("z", poison(n, "f32")), tile=(1024,)),
    ]


@needs_hosts
def test_mixing_devices_in_one_launch_is_refused_with_bt0308_by_both_hosts(example, cpp_host, tmp_path):
    from buildtile.errors import BuildtileError

    count = device_count()
    if count < 2:
        from gpu_gate import not_this_hardware

        not_this_hardware(f"mixing devices needs a machine with 2 GPUs; this one has {count}")
    manifest, _ = example
    jobs = mixed_jobs()
    inputs = tmp_path / "in"
    inputs.mkdir()
    jobs_file = write_jobs(inputs, jobs)
    failures = []
    for job in jobs:
        arrays = python_arrays(job, 0)
        try:
            python_call(job, arrays, manifest)
            failures.append(f"{job.id}: the Python host launched it")
        except BuildtileError as exc:
            if exc.code != "BT0308" or "different devices" not in str(exc):
                failures.append(f"{job.id}: Python: {exc}")
        after = python_read(arrays)          # nothing ran: every argument holds what was uploaded
        for arg in (a for a in job.args if isinstance(a, Array)):
            if after[arg.name].tobytes() != arg.data.tobytes():
                failures.append(f"{job.id}: Python: `{arg.name}` changed although the launch was refused")
    outcomes = cpp_run(cpp_host, jobs_file, tmp_path / "out", device=0)
    for job in jobs:
        status, message = outcomes.get(job.id, (None, "not run"))
        if status != 308 or "different devices" not in message:
            failures.append(f"{job.id}: C++: status {status}: {message}")
        for arg in (a for a in job.args if isinstance(a, Array)):
            if cpp_output(tmp_path / "out", job, arg).tobytes() != arg.data.tobytes():
                failures.append(f"{job.id}: C++: `{arg.name}` changed although the launch was refused")
    assert not failures, "\n".join(failures)


class HostsDisagree(AssertionError):
    """The hosts treated one launch differently."""


@needs_hosts
def test_a_launch_while_another_device_is_current_goes_to_the_arguments_device_in_both_hosts(
        example, cpp_host, tmp_path):
    count = device_count()
    if count < 2:
        from gpu_gate import not_this_hardware

        not_this_hardware(f"another device needs a machine with 2 GPUs; this one has {count}")
    manifest, _ = example
    jobs = [job for job in make_jobs() if job.kernel in ("ops.vecadd", "tiles.add")]
    inputs = tmp_path / "in"
    inputs.mkdir()
    jobs_file = write_jobs(inputs, jobs)
    with another_context_current(1) as other:   # cuda:0 current, the arguments on cuda:1
        assert other == 0
        for job in jobs:
            arrays = python_arrays(job, 1)
            python_call(job, arrays, manifest)
            job.check(python_read(arrays))
    out = tmp_path / "out"
    outcomes = cpp_run(cpp_host, jobs_file, out, device=1, launch_from="main", current=0)
    refused = {job.id: outcomes[job.id] for job in jobs if outcomes[job.id][0] != 0}
    if refused:
        raise HostsDisagree(f"Python launched on cuda:1 with cuda:0 current; the C++ host did not: {refused}")
    for job in jobs:
        job.check({a.name: cpp_output(out, job, a) for a in job.args if isinstance(a, Array)})
