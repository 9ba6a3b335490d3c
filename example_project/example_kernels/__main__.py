"""``python -m example_kernels``: run every kernel once and check it against NumPy.

Without a GPU the kernels run on buildtile's CPU emulator when the full
buildtile is installed (``--cpu`` asks for it; smaller sizes), else it says so
and lists the compiled kernels (targets and image sizes, from the package manifest). ``--cmake-prefix``, ``--cmake-dir``, ``--include-dir`` and
``--library`` print where a C/C++ host finds these kernels (see cpp/).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from buildtile.interop.abi import spell_type

PACKAGE = "example_kernels"
C_HOST_FLAGS = ("--cmake-prefix", "--cmake-dir", "--include-dir", "--library")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(arg.split("=", 1)[0] in C_HOST_FLAGS for arg in argv):
        try:
            from buildtile.interop.host_cli import package_main
        except ImportError as exc:
            print(f"this buildtile cannot describe a C/C++ interface: {exc}", file=sys.stderr)
            return 2
        return package_main(PACKAGE, argv)

    parser = argparse.ArgumentParser(
        prog=f"python -m {PACKAGE}",
        description="Run each kernel of example_kernels on random inputs and compare it with NumPy. "
                    f"For the C/C++ interface: {', '.join(C_HOST_FLAGS)}.",
    )
    parser.add_argument("--list", action="store_true", help="only list the compiled kernels")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    parser.add_argument("--cpu", action="store_true",
                        help="run on buildtile's CPU emulator (BUILDTILE_DEVICE=cpu) instead of a GPU")
    args = parser.parse_args(argv)
    if args.cpu:
        os.environ["BUILDTILE_DEVICE"] = "cpu"

    from buildtile.errors import BuildtileError

    try:
        manifest, manifest_dir = _manifest()
    except BuildtileError as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.list:
        _list_kernels(manifest, manifest_dir)
        return 0

    from buildtile.runtime import cuda_available

    usable, description = cuda_available()
    if not usable and _emulator_installed():
        print(f"no CUDA GPU found ({description}): running on buildtile's CPU emulator")
        os.environ["BUILDTILE_DEVICE"] = "cpu"
        from buildtile.runtime.driver import set_driver

        set_driver(None)   # the next launch takes the emulator's driver
        usable, description = cuda_available()
    if not usable:
        print(f"no CUDA GPU found: {description}")
        print("nothing was run; the package carries these compiled kernels:")
        _list_kernels(manifest, manifest_dir)
        return 0
    print(f"running on {description}")
    scale = 1000 if os.environ.get("BUILDTILE_DEVICE") == "cpu" else 1   # the emulator is slow
    return _run_all(np.random.default_rng(args.seed), scale)


def _emulator_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("buildtile.emulate") is not None


# ----------------------------------------------------------------------------- listing

def _manifest() -> tuple[dict, Path]:
    from buildtile.interop import manifest as manifest_format
    from buildtile.runtime.package import find_manifest

    path = find_manifest(f"{PACKAGE}.ops")
    return manifest_format.load(path), path.parent


def _size(path: Path) -> str:
    try:
        size = path.stat().st_size
    except OSError:
        return "missing"
    return f"{size / 1024:.1f} KiB" if size >= 1024 else f"{size} B"


def _list_kernels(manifest: dict, manifest_dir: Path) -> None:
    print(f"{manifest.get('package', PACKAGE)}: built by buildtile {manifest.get('buildtile_version', '?')}, "
          f"ABI {manifest.get('abi_version')}, targets {', '.join(manifest.get('targets', []))}"
          f"{', PTX ' + manifest['ptx_target'] if manifest.get('ptx_target') else ''}, "
          f"checks={manifest.get('checks', '?')}")
    for kernel in manifest.get("kernels", []):
        params = ", ".join(f"{p['name']}: {spell_type(p['kind'], p['dtype'], p.get('rank', 1))}"
                           for p in kernel.get("params", []))
        block = (kernel.get("contract") or {}).get("block")
        launch = ("one block per tile" if "tile" in kernel else
                  f"block={tuple(block)}" if block else "no contract: unsafe_launch only")
        print(f"  {kernel['module']}.{kernel['name']}({params})  {launch}")
        for spec in kernel.get("tile", {}).get("specializations", [kernel]):
            dtypes = f", dtypes {spec['dtypes']}" if spec.get("dtypes") else ""
            shapes = f"tile shapes {spec['tile_shapes']}{dtypes}: " if "tile_shapes" in spec else ""
            print(f"      {shapes}{_images(spec.get('artifacts') or {}, manifest_dir)}")


def _images(artifacts: dict, manifest_dir: Path) -> str:
    images = []
    for key, artifact in sorted(artifacts.items()):
        label = f"PTX {artifact.get('target', '')}".strip() if artifact.get("kind") == "ptx" else f"{key} cubin"
        images.append(f"{label} {_size(manifest_dir / artifact['path'])}")
    return " | ".join(images) if images else "no images"


def _ragged(rng, low: int, high: int, block: int = 256, scale: int = 1) -> int:
    """A random size that is not a multiple of ``block``, so the last block is partial
    (``scale`` times smaller, but at least two blocks)."""
    n = max(2 * block + 1, int(rng.integers(low, high)) // scale)
    return n + 1 if n % block == 0 else n


def _collatz_reference(x: np.ndarray, limit: int) -> np.ndarray:
    n = x.copy()
    steps = np.zeros(x.shape, np.int32)
    active = (n != 1) & (steps < limit)
    while active.any():
        n[active] = np.where(n[active] % 2 == 0, n[active] // 2, 3 * n[active] + 1)
        steps[active] += 1
        active = (n != 1) & (steps < limit)
    return steps


def _run_all(rng, scale: int = 1) -> int:
    from buildtile.errors import BuildtileError
    from buildtile.runtime import DeviceArray
    from example_kernels import ops

    def poisoned(shape, dtype):
        """An output whose every element is wrong until the kernel writes it."""
        array = DeviceArray.empty(shape, dtype)
        array.fill_bytes(0xFF)  # NaN for floats, -1 for integers
        return array

    def vecadd():
        n = _ragged(rng, 500_000, 2_000_000, scale=scale)
        a, b = rng.standard_normal((2, n)).astype(np.float32)
        c = poisoned(n, np.float32)
        ops.vecadd[ops.vecadd.grid_for(n)](DeviceArray.from_numpy(a), DeviceArray.from_numpy(b), c)
        return f"n={n}", c.to_numpy(), a + b, 0.0

    def saxpy():
        n = _ragged(rng, 500_000, 2_000_000, scale=scale)
        x, y = rng.standard_normal((2, n)).astype(np.float32)
        alpha = np.float32(rng.uniform(-4, 4))
        out = poisoned(n, np.float32)
        ops.saxpy[ops.saxpy.grid_for(n)](alpha, DeviceArray.from_numpy(x), DeviceArray.from_numpy(y), out)
        expected = alpha * x + y
        return f"n={n}", out.to_numpy(), expected, 1e-5 * float(np.abs(expected).max(initial=1.0))

    def matadd():
        rows, cols = _ragged(rng, 100, 2000, 16, scale=scale), _ragged(rng, 100, 2000, 16, scale=scale)
        a, b = rng.standard_normal((2, rows, cols)).astype(np.float32)
        c = poisoned((rows, cols), np.float32)
        ops.matadd[ops.matadd.grid_for(rows, cols)](DeviceArray.from_numpy(a), DeviceArray.from_numpy(b), c)
        return f"shape={rows}x{cols}", c.to_numpy(), a + b, 0.0

    def polyval_abs():
        n = _ragged(rng, 500_000, 2_000_000, 128, scale=scale)
        coeffs = rng.standard_normal(6)
        x = rng.uniform(-2, 2, n)
        y = poisoned(n, np.float64)
        ops.polyval_abs[ops.polyval_abs.grid_for(n)](DeviceArray.from_numpy(coeffs), DeviceArray.from_numpy(x), y)
        expected = np.abs(np.polyval(coeffs, x))
        return f"n={n}", y.to_numpy(), expected, 1e-12 * float(np.abs(expected).max(initial=1.0))

    def collatz_steps():
        n = _ragged(rng, 50_000, 200_000, scale=scale)
        x = rng.integers(1, 10**7, n, dtype=np.int64)
        limit = 500
        out = poisoned(n, np.int32)
        ops.collatz_steps[ops.collatz_steps.grid_for(n)](DeviceArray.from_numpy(x), limit, out)
        return f"n={n}", out.to_numpy(), _collatz_reference(x, limit), 0.0

    from buildtile import tile
    from example_kernels import patterns, tiles

    def block_sum():
        n = _ragged(rng, 500_000, 2_000_000, scale=scale)
        x = rng.standard_normal(n).astype(np.float32)
        blocks = -(-n // 256)
        partial = poisoned(blocks, np.float32)
        patterns.block_sum[blocks](DeviceArray.from_numpy(x), partial)
        expected = np.add.reduceat(x.astype(np.float64), np.arange(0, n, 256))
        return f"n={n}", partial.to_numpy(), expected, 1e-4 * float(np.abs(expected).max(initial=1.0))

    def transpose_tiled():
        rows, cols = _ragged(rng, 100, 2000, 32, scale=scale), _ragged(rng, 100, 2000, 32, scale=scale)
        a = rng.standard_normal((rows, cols)).astype(np.float32)
        out = poisoned((cols, rows), np.float32)
        patterns.transpose_tiled[(-(-cols // 32), -(-rows // 32))](DeviceArray.from_numpy(a), out)
        return f"shape={rows}x{cols}", out.to_numpy(), a.T, 0.0

    def histogram():
        n, bins = _ragged(rng, 500_000, 2_000_000, scale=scale), 64
        values = rng.integers(-3, bins + 3, n).astype(np.int32)
        counts = DeviceArray.from_numpy(np.zeros(bins, np.uint32))
        patterns.histogram[-(-n // 256)](DeviceArray.from_numpy(values), counts)
        inside = values[(values >= 0) & (values < bins)]
        return f"n={n}", counts.to_numpy(), np.bincount(inside, minlength=bins), 0.0

    def reverse_blocks():
        n = _ragged(rng, 500_000, 2_000_000, scale=scale)
        x = rng.standard_normal(n).astype(np.float32)
        out = poisoned(n, np.float32)
        patterns.reverse_blocks[-(-n // 256)](DeviceArray.from_numpy(x), out)
        padded = np.zeros(-(-n // 256) * 256, np.float32)
        padded[:n] = x
        return f"n={n}", out.to_numpy(), padded.reshape(-1, 256)[:, ::-1].reshape(-1)[:n], 0.0

    from buildtile.runtime import record_dtype
    from example_kernels import particles

    def random_particles(n: int, dt: np.float32, floor: np.float32) -> np.ndarray:
        """Particles none of which ends a step within a hair of the floor (where rounding could
        decide a bounce)."""
        p = np.zeros(n, record_dtype(particles.Particle))
        for field in ("x", "y", "vx", "vy"):
            p[field] = rng.uniform(-2, 2, n)
        p["mass"] = rng.uniform(0.5, 4, n)
        p["bounces"] = rng.integers(0, 5, n)
        ends = p["y"] + (p["vy"] - particles.GRAVITY * dt) * dt
        p["y"][np.abs(ends - floor) < 1e-3] += 0.01
        return p

    def advance():
        n = _ragged(rng, 500_000, 2_000_000, scale=scale)
        dt, floor = np.float32(0.05), np.float32(-1.0)
        before = random_particles(n, dt, floor)
        p = DeviceArray.from_numpy(before)
        particles.advance[particles.advance.grid_for(n)](p, dt, floor)
        vy = before["vy"] - np.float32(particles.GRAVITY) * dt
        y = before["y"] + vy * dt
        below = y < floor
        want = {"x": before["x"] + before["vx"] * dt, "y": np.where(below, floor + (floor - y), y),
                "vx": before["vx"], "vy": np.where(below, -vy, vy), "mass": before["mass"],
                "bounces": before["bounces"] + below}
        after = p.to_numpy()
        fields = list(want)
        return (f"n={n}", np.concatenate([after[f].astype(np.float64) for f in fields]),
                np.concatenate([want[f].astype(np.float64) for f in fields]), 1e-5)

    def to_columns():
        n = _ragged(rng, 500_000, 2_000_000, scale=scale)
        records = random_particles(n, np.float32(0), np.float32(-10))
        x, y, energy = poisoned(n, np.float32), poisoned(n, np.float32), poisoned(n, np.float64)
        particles.to_columns[particles.to_columns.grid_for(n)](DeviceArray.from_numpy(records), x, y, energy)
        speed2 = records["vx"].astype(np.float64) ** 2 + records["vy"].astype(np.float64) ** 2
        expected = np.concatenate([records["x"], records["y"], 0.5 * records["mass"] * speed2])
        got = np.concatenate([x.to_numpy(), y.to_numpy(), energy.to_numpy()])
        return f"n={n}", got, expected, 1e-12 * float(np.abs(expected).max(initial=1.0))

    def tile_run(kernel, *args):
        return [getattr(h, "array", h) for h in kernel(*args).sync_on(0)]

    def tile_add():
        n = _ragged(rng, 500_000, 2_000_000, 1024, scale=scale)
        x, y = rng.standard_normal((2, n)).astype(np.float32)
        *_, z = tile_run(tiles.add, DeviceArray.from_numpy(x), DeviceArray.from_numpy(y),
                         tile.partition(poisoned(n, np.float32), [1024]))
        return f"n={n}", z.to_numpy(), x + y, 0.0

    def tile_row_sum():
        rows, cols = _ragged(rng, 100, 2000, 64, scale=scale), _ragged(rng, 100, 2000, 64, scale=scale)
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        _, z = tile_run(tiles.row_sum, DeviceArray.from_numpy(x), tile.partition(poisoned(rows, np.float32), [64]))
        expected = x.astype(np.float64).sum(axis=1)
        return f"shape={rows}x{cols}", z.to_numpy(), expected, 1e-4 * float(np.abs(expected).max(initial=1.0))

    def tile_matmul_f16():
        m, n, k = (_ragged(rng, 100, 1000, 64, scale=scale) for _ in range(3))
        a, b = (rng.standard_normal(s).astype(np.float16) for s in ((m, k), (k, n)))
        *_, c = tile_run(tiles.matmul_f16, DeviceArray.from_numpy(a), DeviceArray.from_numpy(b),
                         tile.partition(poisoned((m, n), np.float16), [64, 64]))
        expected = a.astype(np.float64) @ b.astype(np.float64)
        return f"{m}x{k} @ {k}x{n}", c.to_numpy(), expected, 2 ** -9 * float(np.abs(expected).max(initial=1.0))

    from example_kernels import attention

    def attention_causal():
        seq = _ragged(rng, 100, 600, 64, scale=max(1, scale // 4))
        q, k, v = (rng.standard_normal((1, 2, seq, 64)).astype(np.float16) for _ in range(3))
        *_, out = tile_run(attention.attention, DeviceArray.from_numpy(q), DeviceArray.from_numpy(k),
                           DeviceArray.from_numpy(v), 0.125, True,
                           tile.partition(poisoned((1, 2, seq, 64), np.float16), [1, 1, 64, 64]))
        s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) * 0.125
        s = np.where(np.tril(np.ones((seq, seq), dtype=bool)), s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        expected = np.einsum("bhqk,bhkd->bhqd", p / p.sum(axis=-1, keepdims=True), v.astype(np.float64))
        return f"seq={seq} causal", out.to_numpy(), expected, 4e-3

    failures = 0
    for name, run in [("vecadd", vecadd), ("saxpy", saxpy), ("matadd", matadd),
                      ("polyval_abs", polyval_abs), ("collatz_steps", collatz_steps),
                      ("block_sum", block_sum), ("transpose_tiled", transpose_tiled), ("histogram", histogram),
                      ("reverse_blocks", reverse_blocks), ("particles.advance", advance),
                      ("particles.to_columns", to_columns), ("tiles.add", tile_add), ("tiles.row_sum", tile_row_sum),
                      ("tiles.matmul_f16", tile_matmul_f16), ("attention", attention_causal)]:
        try:
            size, got, expected, tolerance = run()
        except BuildtileError as exc:
            failures += 1
            print(f"{name:<20} FAILED\n{exc}")
            continue
        error = np.abs(got.astype(np.float64) - expected.astype(np.float64))
        worst = float(np.nan_to_num(error, nan=np.inf).max(initial=0.0))
        ok = worst <= tolerance
        failures += not ok
        print(f"{name:<20} {size:<18} max_abs_err={worst:<10.3g} {'OK' if ok else 'MISMATCH'}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
