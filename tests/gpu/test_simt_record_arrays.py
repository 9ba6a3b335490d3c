"""Arrays of records on a real GPU, against NumPy at ragged sizes: example_kernels.particles (an
in-place time step, and an array of structs split into arrays of its fields) and the 2-D copy of
tests/ui/pass/records.py (compiled for this GPU), the records passed as torch uint8 views of
their bytes on cuda and as NumPy structured arrays on the CPU emulator.

Run after `pip install ./example_project`; skipped without a GPU, torch or the package. The
same cases also run on the CPU emulator (``device`` cpu, at the smaller sizes, in the default
suite; see tests/emulated_packages.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
TESTS = Path(__file__).parents[1]
sys.path.insert(0, str(TESTS))
from emulated_packages import built_for_the_emulator, examples_for_the_emulator, on_devices  # noqa: E402

CASES = TESTS / "ui" / "pass" / "records.py"
_device = {"name": "cuda"}   # the device of the running case (set by the fixtures)


@pytest.fixture
def particles(device):
    _device["name"] = device
    if device == "cuda":
        yield pytest.importorskip("example_kernels.particles", reason="the example project is not installed")
        return
    from buildtile.emulate import emulated

    module = examples_for_the_emulator()["particles"]
    with emulated():
        yield module


@pytest.fixture(scope="module")
def compiled_cases(tmp_path_factory):
    """tests/ui/pass/records.py built per device, once: {"cuda": module, "cpu": module}."""
    built: dict = {}
    contexts = []

    def get(device):
        if device not in built:
            if device == "cuda":
                from kernel_packages import compiled_for_this_gpu

                context = compiled_for_this_gpu(CASES, "btrecords", tmp_path_factory.mktemp("records"))
                built[device] = context.__enter__()
            else:
                context = built_for_the_emulator({"ops": CASES}, "cpurecords", tmp_path_factory.mktemp("records"))
                built[device] = context.__enter__()["ops"]
            contexts.append(context)
        return built[device]

    yield get
    for context in reversed(contexts):
        context.__exit__(None, None, None)


@pytest.fixture
def cases(device, compiled_cases):
    _device["name"] = device
    module = compiled_cases(device)
    if device == "cuda":
        yield module
        return
    from buildtile.emulate import emulated

    with emulated():
        yield module


def on_device(records: np.ndarray):
    """A copy of ``records`` on the running device: their bytes as a torch uint8 tensor of shape
    (..., itemsize) on cuda, a NumPy structured array on the emulator."""
    if _device["name"] == "cuda":
        shape = (*records.shape, records.dtype.itemsize)
        return torch.from_numpy(np.ascontiguousarray(records).view(np.uint8).reshape(shape)).to("cuda")
    return records.copy()


def on_host(array, dtype: np.dtype) -> np.ndarray:
    """The records of ``array`` (see :func:`on_device`) as a NumPy structured array."""
    if isinstance(array, np.ndarray):
        return array
    torch.cuda.synchronize()
    data = array.cpu().numpy()
    return np.ascontiguousarray(data).view(dtype).reshape(data.shape[:-1])


def column(values: np.ndarray):
    if _device["name"] == "cuda":
        return torch.from_numpy(values).to("cuda")
    return values.copy()


def column_on_host(array) -> np.ndarray:
    if isinstance(array, np.ndarray):
        return array
    torch.cuda.synchronize()
    return array.cpu().numpy()


def swarm(particles, n: int, seed: int, dt: np.float32, floor: np.float32) -> np.ndarray:
    """``n`` random particles, none of which ends a step within a hair of the floor."""
    from buildtile.runtime import record_dtype

    rng = np.random.default_rng(seed)
    p = np.zeros(n, record_dtype(particles.Particle))
    for field in ("x", "y", "vx", "vy"):
        p[field] = rng.uniform(-2, 2, n)
    p["mass"], p["bounces"] = rng.uniform(0.5, 4, n), rng.integers(0, 5, n)
    ends = p["y"] + (p["vy"] - np.float32(particles.GRAVITY) * dt) * dt
    p["y"][np.abs(ends - floor) < 1e-3] += 0.01
    return p


@pytest.mark.parametrize("device,n", on_devices([1, 255, 257, 100_003]))
def test_advance_moves_each_particle_in_place(particles, n):
    dt, floor = np.float32(0.05), np.float32(-1.0)
    before = swarm(particles, n, n, dt, floor)
    p = on_device(before)
    if _device["name"] == "cuda":   # the bytes of records held as float32 words, viewed as uint8
        words = torch.from_numpy(before.copy().view(np.float32).reshape(n, 8)).to("cuda")
        p = words.view(torch.uint8)
        assert tuple(p.shape) == (n, 32)
    particles.advance[particles.advance.grid_for(n)](p, dt, floor)
    after = on_host(p, before.dtype)
    vy = before["vy"] - np.float32(particles.GRAVITY) * dt
    y = before["y"] + vy * dt
    below = y < floor
    np.testing.assert_allclose(after["x"], before["x"] + before["vx"] * dt, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(after["y"], np.where(below, floor + (floor - y), y), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(after["vy"], np.where(below, -vy, vy), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(after["vx"], before["vx"])
    np.testing.assert_array_equal(after["mass"], before["mass"])
    np.testing.assert_array_equal(after["bounces"], before["bounces"] + below)


@pytest.mark.parametrize("device,n", on_devices([1, 255, 257, 100_003]))
def test_to_columns_splits_the_records_into_arrays(particles, n):
    records = swarm(particles, n, n + 1, np.float32(0), np.float32(-10))
    x, y = column(np.full(n, np.nan, np.float32)), column(np.full(n, np.nan, np.float32))
    energy = column(np.full(n, np.nan))
    particles.to_columns[particles.to_columns.grid_for(n)](on_device(records), x, y, energy)
    np.testing.assert_array_equal(column_on_host(x), records["x"])
    np.testing.assert_array_equal(column_on_host(y), records["y"])
    speed2 = records["vx"].astype(np.float64) ** 2 + records["vy"].astype(np.float64) ** 2
    np.testing.assert_allclose(column_on_host(energy), 0.5 * records["mass"] * speed2, rtol=1e-12)


@pytest.mark.parametrize("device,shape", on_devices([(1, 1), (17, 33), (300, 517)]))
def test_a_strided_tensor_of_records_is_copied_record_by_record(cases, shape):
    rows, cols = shape
    rng = np.random.default_rng(rows)
    sample = np.dtype([("tag", "i1"), ("value", "<f8"), ("count", "<i8")], align=True)
    src = np.zeros((cols, rows), sample)   # its transpose is the (rows, cols) source: strides (1, rows)
    src["tag"] = rng.integers(-100, 100, src.shape)
    src["value"] = rng.standard_normal(src.shape)
    src["count"] = rng.integers(-5, 5, src.shape)
    if _device["name"] == "cuda":
        src_arg = on_device(src).transpose(0, 1)
    else:
        src_arg = src.T
    dst = on_device(np.zeros((rows, cols), sample))
    cases.grid_copy[cases.grid_copy.grid_for(rows, cols)](src_arg, dst)
    got = on_host(dst, sample)
    np.testing.assert_array_equal(got["tag"], src.T["tag"])
    np.testing.assert_array_equal(got["value"], src.T["value"])
    np.testing.assert_array_equal(got["count"], src.T["count"] + 1)
