"""One check per kernel of the package: run it on random inputs at ragged sizes, compare with NumPy.

``python -m example_kernels`` calls :func:`run_checks`: the check of every kernel
-- and of every specialisation of a Tile kernel -- that the package's manifest
lists (:func:`manifest_entries`); an entry without a check fails. A check
takes a :class:`Run` (the package's modules, the random generator, the
specialisation, whether sizes are small) and returns a :class:`Comparison`.
Sizes are never multiples of the block or tile, so every partial block and
ragged tile edge is exercised; on the CPU emulator they are a few blocks or
tiles, on a GPU far larger.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from buildtile import random, tile
from buildtile.runtime import DeviceArray

#: NumPy type of each element type name a check meets (bf16 crosses as float32 values)
NUMPY = {"f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64}
#: the spacing of floats near 1 in each dtype (relative rounding error, twice over)
EPS = {"f16": 2.0 ** -10, "bf16": 2.0 ** -7, "f32": 2.0 ** -23}


@dataclass
class Comparison:
    """What a check ran (``size``), what the kernel wrote and what NumPy says it should have, and
    the largest absolute difference accepted."""

    size: str
    got: np.ndarray
    expected: np.ndarray
    tolerance: float = 0.0


@dataclass
class Run:
    """What one check needs: the package's kernel modules, the inputs' random generator, the Tile
    specialisation to run (its ``tile_shapes`` and ``dtypes``; None for a SIMT kernel), and
    whether sizes are small (the CPU emulator)."""

    package: str
    rng: np.random.Generator
    small: bool
    spec: dict | None = None
    _modules: dict = field(default_factory=dict)

    def module(self, name: str):
        """The package's kernel module ``name`` (``"ops"``, ``"tiles"`` ...)."""
        if name not in self._modules:
            self._modules[name] = importlib.import_module(f"{self.package}.{name}")
        return self._modules[name]

    def extent(self, gpu: tuple[int, int], cpu: tuple[int, int], multiple: int = 1) -> int:
        """A random extent in ``gpu`` (or ``cpu`` when small), never a multiple of ``multiple``."""
        low, high = cpu if self.small else gpu
        n = int(self.rng.integers(low, high))
        return n + 1 if multiple > 1 and n % multiple == 0 else n

    def tile_shape(self, param: str) -> list[int]:
        return list(self.spec["tile_shapes"][param])

    def dtype(self, name: str = "T", default: str = "f32") -> str:
        return (self.spec.get("dtypes") or {}).get(name, default)

    def normal(self, shape, dtype: str = "f32") -> np.ndarray:
        """Standard normal values, exactly representable in ``dtype``."""
        values = self.rng.standard_normal(shape).astype(np.float32)
        if dtype == "bf16":
            return DeviceArray.from_numpy(values, dtype="bf16").to_numpy()
        return values.astype(NUMPY[dtype])


def device(values: np.ndarray, dtype: str | None = None) -> DeviceArray:
    return DeviceArray.from_numpy(values, dtype=dtype)


def poisoned(shape, dtype: str) -> DeviceArray:
    """An output whose every element is wrong (NaN, or -1) until the kernel writes it."""
    array = DeviceArray.empty(shape, dtype)
    array.fill_bytes(0xFF)
    return array


def blocks(n: int, block: int) -> int:
    return -(-n // block)


def chunks(x: np.ndarray, size: int) -> np.ndarray:
    """``x`` zero-padded to whole chunks of ``size`` elements, one chunk a row."""
    padded = np.zeros(blocks(len(x), size) * size, x.dtype)
    padded[:len(x)] = x
    return padded.reshape(-1, size)


def tile_outputs(kernel, *args) -> list:
    """The arrays of a Tile launch, back from the kernel once it has finished."""
    return [getattr(h, "array", h) for h in kernel(*args).sync_on(0)]


def scaled(expected: np.ndarray, relative: float) -> float:
    return relative * float(np.abs(expected).max(initial=1.0))


#: "module.kernel" -> its check
CHECKS: dict[str, Callable[[Run], Comparison]] = {}


def check(name: str):
    def register(fn: Callable[[Run], Comparison]) -> Callable[[Run], Comparison]:
        CHECKS[name] = fn
        return fn
    return register


# ----------------------------------------------------------------------------- ops

@check("ops.vecadd")
def vecadd(run: Run) -> Comparison:
    ops = run.module("ops")
    n = run.extent((500_000, 2_000_000), (257, 1200), 256)
    a, b = run.normal((2, n))
    c = poisoned(n, "f32")
    ops.vecadd[ops.vecadd.grid_for(n)](device(a), device(b), c)
    return Comparison(f"n={n}", c.to_numpy(), a + b)


@check("ops.saxpy")
def saxpy(run: Run) -> Comparison:
    ops = run.module("ops")
    n = run.extent((500_000, 2_000_000), (257, 1200), 256)
    x, y = run.normal((2, n))
    alpha = np.float32(run.rng.uniform(-4, 4))
    out = poisoned(n, "f32")
    ops.saxpy[ops.saxpy.grid_for(n)](alpha, device(x), device(y), out)
    expected = alpha * x + y
    return Comparison(f"n={n}", out.to_numpy(), expected, scaled(expected, 1e-6))


@check("ops.matadd")
def matadd(run: Run) -> Comparison:
    ops = run.module("ops")
    rows, cols = (run.extent((100, 2000), (17, 48), 16) for _ in range(2))
    a, b = run.normal((2, rows, cols))
    c = poisoned((rows, cols), "f32")
    ops.matadd[ops.matadd.grid_for(rows, cols)](device(a), device(b), c)
    return Comparison(f"shape={rows}x{cols}", c.to_numpy(), a + b)


@check("ops.polyval_abs")
def polyval_abs(run: Run) -> Comparison:
    ops = run.module("ops")
    n = run.extent((500_000, 2_000_000), (129, 600), 128)
    coeffs = run.rng.standard_normal(6)
    x = run.rng.uniform(-2, 2, n)
    y = poisoned(n, "f64")
    ops.polyval_abs[ops.polyval_abs.grid_for(n)](device(coeffs), device(x), y)
    expected = np.abs(np.polyval(coeffs, x))
    return Comparison(f"n={n}", y.to_numpy(), expected, scaled(expected, 1e-12))


def collatz_reference(x: np.ndarray, limit: int) -> np.ndarray:
    n = x.copy()
    steps = np.zeros(x.shape, np.int32)
    active = (n != 1) & (steps < limit)
    while active.any():
        n[active] = np.where(n[active] % 2 == 0, n[active] // 2, 3 * n[active] + 1)
        steps[active] += 1
        active = (n != 1) & (steps < limit)
    return steps


@check("ops.collatz_steps")
def collatz_steps(run: Run) -> Comparison:
    ops = run.module("ops")
    n = run.extent((50_000, 200_000), (257, 800), 256)
    x = run.rng.integers(1, 10**7, n, dtype=np.int64)
    limit = 500
    out = poisoned(n, "i32")
    ops.collatz_steps[ops.collatz_steps.grid_for(n)](device(x), limit, out)
    return Comparison(f"n={n}", out.to_numpy(), collatz_reference(x, limit))


# ----------------------------------------------------------------------------- patterns

@check("patterns.block_sum")
def block_sum(run: Run) -> Comparison:
    patterns = run.module("patterns")
    n = run.extent((500_000, 2_000_000), (257, 1200), 256)
    x = run.normal(n)
    partial = poisoned(blocks(n, 256), "f32")
    patterns.block_sum[blocks(n, 256)](device(x), partial)
    expected = np.add.reduceat(x.astype(np.float64), np.arange(0, n, 256))
    return Comparison(f"n={n}", partial.to_numpy(), expected, 1e-5 * 256)


def _transpose(run: Run, kernel, edge: int) -> Comparison:
    """``out = a.T`` by a kernel whose blocks each cover an ``edge`` x ``edge`` tile."""
    rows, cols = (run.extent((100, 2000), (edge + 1, 3 * edge), edge) for _ in range(2))
    a = run.normal((rows, cols))
    out = poisoned((cols, rows), "f32")
    kernel[(blocks(cols, edge), blocks(rows, edge))](device(a), out)
    return Comparison(f"shape={rows}x{cols}", out.to_numpy(), a.T)


def _histogram(run: Run, kernel, bins: int) -> Comparison:
    """Counts of values in ``0..bins-1`` (some values lie outside and are not counted)."""
    n = run.extent((500_000, 2_000_000), (257, 1200), 256)
    values = run.rng.integers(-5, bins + 6, n).astype(np.int32)
    counts = device(np.zeros(bins, np.uint32))
    kernel[blocks(n, 256)](device(values), counts)
    inside = values[(values >= 0) & (values < bins)]
    return Comparison(f"n={n}", counts.to_numpy(), np.bincount(inside, minlength=bins))


@check("patterns.transpose_tiled")
def transpose_tiled(run: Run) -> Comparison:
    return _transpose(run, run.module("patterns").transpose_tiled, run.module("patterns").TILE)


@check("patterns.histogram")
def histogram(run: Run) -> Comparison:
    return _histogram(run, run.module("patterns").histogram, 64)


@check("patterns.softmax_rows")
def softmax_rows(run: Run) -> Comparison:
    patterns = run.module("patterns")
    rows, cols = run.extent((100, 2000), (2, 5)), run.extent((100, 3000), (129, 300), 128)
    x = run.normal((rows, cols)) * 4
    out = poisoned((rows, cols), "f32")
    patterns.softmax_rows[rows](device(x), out)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return Comparison(f"shape={rows}x{cols}", out.to_numpy(), e / e.sum(axis=1, keepdims=True), 1e-6)


@check("patterns.laplacian_3d")
def laplacian_3d(run: Run) -> Comparison:
    patterns = run.module("patterns")
    nz, ny, nx = run.extent((20, 100), (3, 6), 2), run.extent((20, 100), (5, 12), 4), run.extent((50, 300), (33, 70), 32)
    u = run.normal((nz, ny, nx))
    out = poisoned((nz, ny, nx), "f32")
    patterns.laplacian_3d[(blocks(nx, 32), blocks(ny, 4), blocks(nz, 2))](device(u), out)
    expected = u.astype(np.float64)
    inner = u.astype(np.float64)
    expected[1:-1, 1:-1, 1:-1] = (inner[:-2, 1:-1, 1:-1] + inner[2:, 1:-1, 1:-1] + inner[1:-1, :-2, 1:-1]
                                  + inner[1:-1, 2:, 1:-1] + inner[1:-1, 1:-1, :-2] + inner[1:-1, 1:-1, 2:]
                                  - 6.0 * inner[1:-1, 1:-1, 1:-1])
    return Comparison(f"shape={nz}x{ny}x{nx}", out.to_numpy(), expected, 1e-5)


@check("patterns.sum_partials")
def sum_partials(run: Run) -> Comparison:
    patterns = run.module("patterns")
    n = run.extent((500_000, 2_000_000), (1025, 3000), 256)
    grid = 7 if not run.small else 3
    x = run.normal(n)
    partial = poisoned(grid, "f32")
    patterns.sum_partials[grid](device(x), partial)
    # thread t of block b reads the elements k = b * 256 + t (mod the grid's thread count)
    expected = chunks(x.astype(np.float64), grid * 256).reshape(-1, grid, 256).sum(axis=(0, 2))
    return Comparison(f"n={n}, {grid} blocks", partial.to_numpy(), expected, 1e-6 * float(np.abs(x).sum()))


@check("patterns.sum_total")
def sum_total(run: Run) -> Comparison:
    patterns = run.module("patterns")
    n = run.extent((500_000, 2_000_000), (1025, 5000), 256)
    grid = 40 if not run.small else 2
    x = run.normal(n)
    total = device(np.zeros(1, np.float32))
    patterns.sum_total[grid](device(x), total)
    return Comparison(f"n={n}, {grid} blocks", total.to_numpy(), np.array([x.astype(np.float64).sum()]),
                      1e-6 * float(np.abs(x).sum()))


@check("patterns.reverse_blocks")
def reverse_blocks(run: Run) -> Comparison:
    patterns = run.module("patterns")
    n = run.extent((500_000, 2_000_000), (257, 1200), 256)
    x = run.normal(n)
    out = poisoned(n, "f32")
    patterns.reverse_blocks[blocks(n, 256)](device(x), out)
    return Comparison(f"n={n}", out.to_numpy(), chunks(x, 256)[:, ::-1].reshape(-1)[:n])


# ----------------------------------------------------------------------------- memory

@check("memory.transpose_shared")
def transpose_shared(run: Run) -> Comparison:
    return _transpose(run, run.module("memory").transpose_shared, run.module("memory").TILE)


@check("memory.block_histogram")
def block_histogram(run: Run) -> Comparison:
    return _histogram(run, run.module("memory").block_histogram, run.module("memory").BINS)


@check("memory.grid_histogram")
def grid_histogram(run: Run) -> Comparison:
    memory = run.module("memory")
    n, side = run.extent((500_000, 2_000_000), (257, 1200), 256), memory.GRID_BINS
    xs, ys = run.rng.integers(-2, side + 2, (2, n)).astype(np.int32)
    bins = device(np.zeros(side * side, np.uint32))
    memory.grid_histogram[blocks(n, 256)](device(xs), device(ys), bins)
    on = (xs >= 0) & (xs < side) & (ys >= 0) & (ys < side)
    return Comparison(f"n={n}", bins.to_numpy(), np.bincount(ys[on] * side + xs[on], minlength=side * side))


@check("memory.polynomial")
def polynomial(run: Run) -> Comparison:
    memory = run.module("memory")
    n = run.extent((500_000, 2_000_000), (257, 1200), 256)
    x = run.rng.uniform(-2, 2, n).astype(np.float32)
    y = poisoned(n, "f32")
    memory.polynomial[blocks(n, 256)](device(x), y)
    expected = np.polynomial.polynomial.polyval(x.astype(np.float64), memory.COEFFS)
    return Comparison(f"n={n}", y.to_numpy(), expected, scaled(expected, 1e-6))


@check("memory.segmented_scan")
def segmented_scan(run: Run) -> Comparison:
    memory = run.module("memory")
    n = run.extent((500_000, 2_000_000), (129, 600), 128)
    x = run.normal(n)
    out = poisoned(n, "f32")
    memory.segmented_scan[blocks(n, 128)](device(x), out)
    expected = chunks(x.astype(np.float64), memory.SEGMENT).cumsum(axis=1).reshape(-1)[:n]
    return Comparison(f"n={n}", out.to_numpy(), expected, 1e-5 * memory.SEGMENT)


@check("memory.brighten")
def brighten(run: Run) -> Comparison:
    memory = run.module("memory")
    n = run.extent((500_000, 2_000_000), (257, 1200), 256)
    pixels = run.rng.integers(0, 256, n).astype(np.uint8)
    gain, bias = int(run.rng.integers(8, 48)), int(run.rng.integers(-60, 60))
    out = poisoned(n, "u8")
    memory.brighten[blocks(n, 256)](device(pixels), out, gain, bias)
    with np.errstate(over="ignore"):
        shifted = ((pixels.astype(np.uint16) * np.uint16(gain)) // np.uint16(16)).astype(np.int16) + np.int16(bias)
    return Comparison(f"n={n}, gain={gain}, bias={bias}", out.to_numpy(), np.clip(shifted, 0, 255).astype(np.uint8))


@check("memory.widen")
def widen(run: Run) -> Comparison:
    memory = run.module("memory")
    n = run.extent((500_000, 2_000_000), (257, 1200), 256)
    a = run.rng.integers(-128, 128, n).astype(np.int8)
    b = run.rng.integers(0, 65536, n).astype(np.uint16)
    wide, low = poisoned(n, "i32"), poisoned(n, "i16")
    memory.widen[blocks(n, 256)](device(a), device(b), wide, low)
    with np.errstate(over="ignore"):
        y = (a * np.int8(3) + np.int8(1)).astype(np.int8)     # 8-bit arithmetic wraps
    expected = np.concatenate([y.astype(np.int32) + b.astype(np.int32), b.astype(np.int16) >> 2])
    return Comparison(f"n={n}", np.concatenate([wide.to_numpy(), low.to_numpy()]), expected)


@check("memory.random_fill")
def random_fill(run: Run) -> Comparison:
    memory = run.module("memory")
    n = run.extent((500_000, 2_000_000), (257, 1200), 256)
    seed, offset = int(run.rng.integers(0, 2**63)), int(run.rng.integers(0, 2**40))
    uniform, normal, words = poisoned(n, "f32"), poisoned(n, "f32"), poisoned(n, "u32")
    memory.random_fill[blocks(n, 256)](uniform, normal, words, seed, offset)
    i = np.arange(n, dtype=np.uint64)
    expected = np.concatenate([random.uniform(seed, np.uint64(offset) + i), random.normal(seed, np.uint64(offset) + i),
                               random.philox(seed, i, 3, 2)])
    got = np.concatenate([uniform.to_numpy(), normal.to_numpy(), words.to_numpy()])
    # the stream's words agree exactly; the normal draws as closely as the devices' log and cos
    return Comparison(f"n={n}", got, expected, 1e-4)


# ----------------------------------------------------------------------------- cooperative, numbers

@check("cooperative.normalized_histogram")
def normalized_histogram(run: Run) -> Comparison:
    from buildtile.runtime.driver import get_driver

    cooperative = run.module("cooperative")
    n, bins = run.extent((500_000, 2_000_000), (600, 3000), 256), int(run.rng.integers(5, 300))
    values = run.rng.integers(-3, bins + 3, n).astype(np.int32)
    counts, freq = device(np.zeros(bins, np.uint32)), poisoned(bins, "f32")
    grid = get_driver().multiprocessor_count(0)   # one block per SM is always resident at once
    cooperative.normalized_histogram[grid](device(values), counts, freq)
    want = np.bincount(values[(values >= 0) & (values < bins)], minlength=bins)
    got = np.concatenate([counts.to_numpy(), freq.to_numpy()])
    return Comparison(f"n={n}, {bins} bins, {grid} blocks", got, np.concatenate([want, want / n]), 1e-6)


@check("numbers.rotate_phase")
def rotate_phase(run: Run) -> Comparison:
    numbers = run.module("numbers")
    n = run.extent((500_000, 2_000_000), (257, 1200), 256)
    z = (run.rng.standard_normal(n) + 1j * run.rng.standard_normal(n)).astype(np.complex64)
    theta = run.rng.uniform(-np.pi, np.pi, n).astype(np.float32)
    out, magnitude = poisoned(n, "complex64"), poisoned(n, "f32")
    numbers.rotate_phase[blocks(n, 256)](device(z), device(theta), out, magnitude)
    rotated = z.astype(np.complex128) * np.exp(1j * theta.astype(np.float64))
    got, wrote = out.to_numpy(), magnitude.to_numpy()
    expected = np.concatenate([rotated.real, rotated.imag, np.abs(z.astype(np.complex128))])
    return Comparison(f"n={n}", np.concatenate([got.real, got.imag, wrote]), expected, scaled(expected, 1e-6))


# ----------------------------------------------------------------------------- particles

def _random_particles(run: Run, n: int, dt: np.float32, floor: np.float32) -> np.ndarray:
    """Particles none of which ends a step within a hair of the floor (where rounding could
    decide a bounce)."""
    from buildtile.runtime import record_dtype

    particles = run.module("particles")
    p = np.zeros(n, record_dtype(particles.Particle))
    for name in ("x", "y", "vx", "vy"):
        p[name] = run.rng.uniform(-2, 2, n)
    p["mass"] = run.rng.uniform(0.5, 4, n)
    p["bounces"] = run.rng.integers(0, 5, n)
    ends = p["y"] + (p["vy"] - particles.GRAVITY * dt) * dt
    p["y"][np.abs(ends - floor) < 1e-3] += 0.01
    return p


@check("particles.advance")
def particles_advance(run: Run) -> Comparison:
    particles = run.module("particles")
    n = run.extent((500_000, 2_000_000), (257, 1200), 256)
    dt, floor = np.float32(0.05), np.float32(-1.0)
    before = _random_particles(run, n, dt, floor)
    p = device(before)
    particles.advance[particles.advance.grid_for(n)](p, dt, floor)
    vy = before["vy"] - np.float32(particles.GRAVITY) * dt
    y = before["y"] + vy * dt
    below = y < floor
    want = {"x": before["x"] + before["vx"] * dt, "y": np.where(below, floor + (floor - y), y),
            "vx": before["vx"], "vy": np.where(below, -vy, vy), "mass": before["mass"],
            "bounces": before["bounces"] + below}
    after = p.to_numpy()
    return Comparison(f"n={n}", np.concatenate([after[name].astype(np.float64) for name in want]),
                      np.concatenate([want[name].astype(np.float64) for name in want]), 1e-5)


@check("particles.to_columns")
def particles_to_columns(run: Run) -> Comparison:
    particles = run.module("particles")
    n = run.extent((500_000, 2_000_000), (257, 1200), 256)
    records = _random_particles(run, n, np.float32(0), np.float32(-10))
    x, y, energy = poisoned(n, "f32"), poisoned(n, "f32"), poisoned(n, "f64")
    particles.to_columns[particles.to_columns.grid_for(n)](device(records), x, y, energy)
    speed2 = records["vx"].astype(np.float64) ** 2 + records["vy"].astype(np.float64) ** 2
    expected = np.concatenate([records["x"], records["y"], 0.5 * records["mass"] * speed2])
    got = np.concatenate([x.to_numpy(), y.to_numpy(), energy.to_numpy()])
    return Comparison(f"n={n}", got, expected, scaled(expected, 1e-12))


# ----------------------------------------------------------------------------- tiles

@check("tiles.add")
def tile_add(run: Run) -> Comparison:
    tiles = run.module("tiles")
    (width,), dtype = run.tile_shape("z"), run.dtype()
    n = run.extent((500_000, 2_000_000), (width + 1, 2 * width + width // 2), width)
    x, y = run.normal((2, n), dtype)
    *_, z = tile_outputs(tiles.add, device(x, dtype), device(y, dtype), tile.partition(poisoned(n, dtype), [width]))
    expected = (x.astype(np.float32) + y.astype(np.float32)).astype(np.float64)
    return Comparison(f"n={n}, {dtype}", z.to_numpy(), expected, scaled(expected, EPS.get(dtype, 0) / 2))


@check("tiles.axpby")
def tile_axpby(run: Run) -> Comparison:
    tiles = run.module("tiles")
    (width,), dtype = run.tile_shape("z"), run.dtype()
    n = run.extent((500_000, 2_000_000), (width + 1, 2 * width + width // 2), width)
    x, y = run.normal((2, n), dtype)
    alpha, beta = (np.float32(run.rng.uniform(-3, 3)) for _ in range(2))
    *_, z = tile_outputs(tiles.axpby, device(x, dtype), device(y, dtype), alpha, beta,
                         tile.partition(poisoned(n, dtype), [width]))
    expected = alpha * x.astype(np.float32) + beta * y.astype(np.float32)
    return Comparison(f"n={n}, {dtype}", z.to_numpy(), expected, scaled(expected, EPS[dtype]))


@check("tiles.scale_bias")
def tile_scale_bias(run: Run) -> Comparison:
    tiles = run.module("tiles")
    th, tw = run.tile_shape("z")
    rows, cols = run.extent((1000, 5000), (th + 1, 2 * th), th), run.extent((300, 3000), (tw + 1, 2 * tw), tw)
    x, scale, bias = run.normal((rows, cols)), run.normal(cols), run.normal(cols)
    *_, z = tile_outputs(tiles.scale_bias, device(x), device(scale), device(bias),
                         tile.partition(poisoned((rows, cols), "f32"), [th, tw]))
    expected = x.astype(np.float64) * scale + bias
    return Comparison(f"shape={rows}x{cols}", z.to_numpy(), expected, scaled(expected, 1e-6))


def _row_shapes(run: Run, th: int, tw: int) -> list[tuple[int, int]]:
    """(rows, cols) of the two launches of a row kernel: rows one tile spans, and rows that
    span several tiles (the kernels take another path for those)."""
    rows = run.extent((1000, 5000), (th + 1, 2 * th + 2), th) if th > 1 else run.extent((1000, 5000), (2, 5))
    return [(rows, run.extent((tw // 2, tw), (tw // 2, tw), 2)),
            (rows, run.extent((tw + 1, 3 * tw), (tw + 1, tw + tw // 4), tw))]


def _joined(shapes: list[tuple[int, int]], got: list, expected: list, relative: float) -> Comparison:
    want = np.concatenate([e.ravel() for e in expected])
    return Comparison(" and ".join(f"{r}x{c}" for r, c in shapes), np.concatenate([g.ravel() for g in got]), want,
                      scaled(want, relative))


@check("tiles.softmax")
def tile_softmax(run: Run) -> Comparison:
    tiles = run.module("tiles")
    th, tw = run.tile_shape("z")
    shapes, got, expected = _row_shapes(run, th, tw), [], []
    for rows, cols in shapes:
        x = run.normal((rows, cols)) * 4
        _, z = tile_outputs(tiles.softmax, device(x), tile.partition(poisoned((rows, cols), "f32"), [th, tw]))
        e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
        got.append(z.to_numpy())
        expected.append(e / e.sum(axis=1, keepdims=True))
    return _joined(shapes, got, expected, 1e-6)


@check("tiles.layernorm")
def tile_layernorm(run: Run) -> Comparison:
    tiles = run.module("tiles")
    th, tw = run.tile_shape("z")
    eps = np.float32(1e-5)
    shapes, got, expected = _row_shapes(run, th, tw), [], []
    for rows, cols in shapes:
        x = run.normal((rows, cols)) * 3 + 1
        weight, bias = run.normal(cols), run.normal(cols)
        *_, z = tile_outputs(tiles.layernorm, device(x), device(weight), device(bias), eps,
                             tile.partition(poisoned((rows, cols), "f32"), [th, tw]))
        wide = x.astype(np.float64)
        mean, var = wide.mean(axis=1, keepdims=True), wide.var(axis=1, keepdims=True)
        got.append(z.to_numpy())
        expected.append((wide - mean) / np.sqrt(var + eps) * weight + bias)
    return _joined(shapes, got, expected, 1e-5)


@check("tiles.row_sum")
def tile_row_sum(run: Run) -> Comparison:
    tiles = run.module("tiles")
    (th,) = run.tile_shape("z")
    rows, cols = run.extent((100, 5000), (th + 1, 2 * th), th), run.extent((100, 3000), (129, 300), 128)
    x = run.normal((rows, cols))
    _, z = tile_outputs(tiles.row_sum, device(x), tile.partition(poisoned(rows, "f32"), [th]))
    expected = x.astype(np.float64).sum(axis=1)
    return Comparison(f"shape={rows}x{cols}", z.to_numpy(), expected, 1e-6 * cols)


def _matmul(run: Run, name: str, dtype: str) -> Comparison:
    kernel = getattr(run.module("tiles"), name)
    bm, bn = run.tile_shape("c")
    m, n = run.extent((100, 1500), (bm + 1, bm + 9), bm), run.extent((100, 1500), (bn // 2, bn), bn)
    k = run.extent((100, 1000), (33, 48), 32)
    a, b = run.normal((m, k), dtype), run.normal((k, n), dtype)
    *_, c = tile_outputs(kernel, device(a, dtype), device(b, dtype), tile.partition(poisoned((m, n), dtype), [bm, bn]))
    expected = a.astype(np.float64) @ b.astype(np.float64)
    return Comparison(f"{m}x{k} @ {k}x{n}", c.to_numpy(), expected, scaled(expected, EPS[dtype]))


@check("tiles.matmul_f16")
def tile_matmul_f16(run: Run) -> Comparison:
    return _matmul(run, "matmul_f16", "f16")


@check("tiles.matmul_bf16")
def tile_matmul_bf16(run: Run) -> Comparison:
    return _matmul(run, "matmul_bf16", "bf16")


# ----------------------------------------------------------------------------- epilogues


def gelu_reference(x: np.ndarray) -> np.ndarray:
    """torch.nn.functional.gelu (its exact form), in float64."""
    return x * 0.5 * (1 + np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2)))


def _epilogue_shapes(run: Run, bm: int, bn: int, k_step: int) -> list[tuple[int, int, int]]:
    """(M, N, K) of an epilogue check's two launches: ragged M and N (on the emulator a tile and a
    few rows by part of a tile), K shorter than one K step, then longer and no multiple of it."""
    m, n = run.extent((100, 1500), (bm + 1, bm + 9), bm), run.extent((100, 1500), (bn // 2, bn), bn)
    short = run.extent((1, k_step), (1, k_step))
    long = run.extent((k_step + 1, 1000), (k_step + 1, k_step + 24), k_step)
    return [(m, n, short), (m, n, long)]


def _epilogue(run: Run, name: str, dtype: str, epilogue: str) -> Comparison:
    """A fused-epilogue matmul of example_kernels.epilogues (``epilogue``: "bias_gelu" or
    "residual") against NumPy in float64 on the same (rounded) inputs."""
    epilogues = run.module("epilogues")
    kernel = getattr(epilogues, name)
    bm, bn = run.tile_shape("c")
    shapes, got, expected = _epilogue_shapes(run, bm, bn, epilogues.K_STEP), [], []
    for m, n, k in shapes:
        a, b = run.normal((m, k), dtype), run.normal((k, n), dtype)
        product = a.astype(np.float64) @ b.astype(np.float64)
        out = tile.partition(poisoned((m, n), dtype), [bm, bn])
        if epilogue == "bias_gelu":
            bias = run.normal(n, dtype)
            *_, c = tile_outputs(kernel, device(a, dtype), device(b, dtype), device(bias, dtype), out)
            expected.append(gelu_reference(product + bias))
        else:
            residual = run.normal((m, n), dtype)
            alpha = np.float32(run.rng.uniform(-2, 2))
            *_, c = tile_outputs(kernel, device(a, dtype), device(b, dtype), device(residual, dtype), alpha, out)
            expected.append(float(alpha) * product + residual)
        got.append(c.to_numpy())
    want = np.concatenate([e.ravel() for e in expected])
    (m, n, _), ks = shapes[0], " and ".join(str(k) for _, _, k in shapes)
    return Comparison(f"{m}x{n}, K={ks}", np.concatenate([g.ravel() for g in got]), want, scaled(want, EPS[dtype]))


@check("epilogues.matmul_bias_gelu_bf16")
def matmul_bias_gelu_bf16(run: Run) -> Comparison:
    return _epilogue(run, "matmul_bias_gelu_bf16", "bf16", "bias_gelu")


@check("epilogues.matmul_bias_gelu_f16")
def matmul_bias_gelu_f16(run: Run) -> Comparison:
    return _epilogue(run, "matmul_bias_gelu_f16", "f16", "bias_gelu")


@check("epilogues.matmul_residual_bf16")
def matmul_residual_bf16(run: Run) -> Comparison:
    return _epilogue(run, "matmul_residual_bf16", "bf16", "residual")


@check("epilogues.matmul_residual_f16")
def matmul_residual_f16(run: Run) -> Comparison:
    return _epilogue(run, "matmul_residual_f16", "f16", "residual")


# ----------------------------------------------------------------------------- attention


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool) -> np.ndarray:
    """softmax(q k^T scale) v per (batch, head) in float64; causal: key j <= query i."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("bhqk,bhkd->bhqd", p / p.sum(axis=-1, keepdims=True), v)


@check("attention.attention")
def attention(run: Run) -> Comparison:
    kernel = run.module("attention").attention
    _, _, rows, d = run.tile_shape("out")
    dtype = run.dtype("T", "bf16")
    batch, heads = (1, 1) if run.small else (2, 4)
    seq_q = run.extent((300, 1500), (rows // 2, rows + 9), rows)
    seq_k = run.extent((300, 1500), (40, 90), 64)
    causal = bool(run.rng.integers(0, 2))
    q, k, v = (run.normal((batch, heads, n, d), dtype) for n in (seq_q, seq_k, seq_k))
    scale = np.float32(1 / np.sqrt(d))
    *_, out = tile_outputs(kernel, device(q, dtype), device(k, dtype), device(v, dtype), scale, causal,
                           tile.partition(poisoned((batch, heads, seq_q, d), dtype), [1, 1, rows, d]))
    expected = attention_reference(q, k, v, float(scale), causal)
    return Comparison(f"seq {seq_q} x {seq_k}{' causal' if causal else ''}", out.to_numpy(), expected,
                      scaled(expected, 2 * EPS[dtype]))


# ----------------------------------------------------------------------------- running them

def manifest_entries(manifest: dict) -> list[tuple[str, dict | None]]:
    """What the demo runs: ``("module.kernel", None)`` for each SIMT kernel of the manifest and
    ``("module.kernel", specialisation)`` for each specialisation of a Tile kernel (module names
    within the package)."""
    entries = []
    for kernel in manifest.get("kernels", []):
        name = f"{kernel['module'].partition('.')[2]}.{kernel['name']}"
        entries += [(name, spec) for spec in kernel.get("tile", {}).get("specializations", [None])]
    return entries


def entry_label(name: str, spec: dict | None) -> str:
    """``tiles.add[z=1024,T=f16]``: a kernel, and for a Tile kernel its specialisation."""
    if spec is None:
        return name
    shapes = [f"{param}={'x'.join(map(str, shape))}" for param, shape in spec.get("tile_shapes", {}).items()]
    dtypes = [f"{var}={dtype}" for var, dtype in (spec.get("dtypes") or {}).items()]
    return f"{name}[{','.join(shapes + dtypes)}]"


def run_checks(manifest: dict, package: str, *, seed: int = 0, small: bool = False,
               only: set[str] | None = None, checks: dict | None = None, out=print) -> int:
    """Run the check of every entry of ``manifest`` (those of the kernels in ``only``, if given)
    on ``package``'s kernels and print one line each; returns how many failed. An entry without a
    check fails: every kernel the package carries must be checked."""
    from buildtile.errors import BuildtileError

    checks = CHECKS if checks is None else checks
    rng = np.random.default_rng(seed)
    failures = 0
    for name, spec in manifest_entries(manifest):
        if only is not None and name not in only:
            continue
        label = entry_label(name, spec)
        check = checks.get(name)
        if check is None:
            failures += 1
            out(f"{label:<36} FAILED: the demo has no check for this kernel (add one to example_kernels/checks.py)")
            continue
        try:
            result = check(Run(package, rng, small, spec))
        except BuildtileError as exc:
            failures += 1
            out(f"{label:<36} FAILED\n{exc}")
            continue
        got = np.asarray(result.got).astype(np.float64)
        expected = np.asarray(result.expected).astype(np.float64)
        if got.shape != expected.shape:
            failures += 1
            out(f"{label:<36} {result.size:<24} MISMATCH: shape {got.shape}, expected {expected.shape}")
            continue
        error = np.abs(got - expected)
        worst = float(np.nan_to_num(error, nan=np.inf).max(initial=0.0))
        ok = worst <= result.tolerance
        failures += not ok
        out(f"{label:<36} {result.size:<24} max_abs_err={worst:<10.3g} {'OK' if ok else 'MISMATCH'}")
    return failures
