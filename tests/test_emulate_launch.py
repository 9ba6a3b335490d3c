"""Launches of an installed package on the CPU emulator (``BUILDTILE_DEVICE=cpu``): SIMT and Tile
kernels on NumPy arrays and CPU torch tensors, through the runtime's own launch checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from buildtile.emulate import emulated
from buildtile.errors import AliasingError, BuildtileError, ContractError, TypeMismatchError
from emulated_packages import examples_for_the_emulator

TESTS = Path(__file__).parent


@pytest.fixture(scope="module")
def examples():
    return examples_for_the_emulator()


@pytest.fixture
def ops(examples):
    with emulated():
        yield examples["ops"]


@pytest.fixture
def tiles(examples):
    with emulated():
        yield examples["tiles"]


@pytest.mark.parametrize("n", [1, 255, 257, 1000])
def test_vecadd_on_numpy_arrays_matches_numpy(ops, n):
    a, b = np.random.default_rng(n).standard_normal((2, n)).astype(np.float32)
    c = np.full(n, np.nan, np.float32)
    ops.vecadd[ops.vecadd.grid_for(n)](a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_matadd_on_a_ragged_grid(ops):
    a, b = np.random.default_rng(1).standard_normal((2, 37, 70)).astype(np.float32)
    c = np.full(a.shape, np.nan, np.float32)
    ops.matadd[ops.matadd.grid_for(*a.shape)](a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_the_runtime_checks_apply_requires_dtype_and_aliasing(ops):
    a = np.zeros(100, np.float32)
    with pytest.raises(ContractError) as info:
        ops.vecadd[1](a, a, np.zeros(101, np.float32))
    assert info.value.code == "BT0600" and "len(a) == len(c)" in str(info.value)
    with pytest.raises(TypeMismatchError) as info:
        ops.vecadd[1](a.astype(np.float64), a, np.zeros(100, np.float32))
    assert info.value.code == "BT0308"
    with pytest.raises(AliasingError) as info:
        ops.vecadd[1](a, a, a)
    assert info.value.code == "BT0502"


def test_cpu_torch_tensors_are_device_arrays_of_the_emulator(ops):
    torch = pytest.importorskip("torch")
    with emulated():   # torch is imported now: its tensors are read as the emulator's
        x = torch.randn(300)
        y = torch.randn(300)
        out = torch.full((300,), float("nan"))
        ops.saxpy[ops.saxpy.grid_for(300)](2.0, x, y, out)
    np.testing.assert_allclose(out.numpy(), 2.0 * x.numpy() + y.numpy(), rtol=1e-6)


@pytest.mark.parametrize("n", [1, 1000, 3000])
def test_a_tile_kernel_on_numpy_arrays(tiles, n):
    from buildtile import tile

    x, y = np.random.default_rng(n).standard_normal((2, n)).astype(np.float32)
    z = np.full(n, np.nan, np.float32)
    tiles.add(x, y, tile.partition(z, [1024])).sync_on(0)
    np.testing.assert_array_equal(z, x + y)


def test_buildtile_device_cpu_runs_a_whole_program(examples, tmp_path):
    """The environment variable alone sends a fresh process's launches to the emulator."""
    ops = examples["ops"]
    root = Path(ops.__file__).parents[1]
    script = (f"import numpy as np\nfrom {ops.__name__.rpartition('.')[0]} import ops\n"
              "a = np.arange(300, dtype=np.float32); c = np.zeros(300, np.float32)\n"
              "ops.vecadd[ops.vecadd.grid_for(300)](a, a, c)\nprint(float(c.sum()))\n")
    env = dict(os.environ, BUILDTILE_DEVICE="cpu",
               PYTHONPATH=os.pathsep.join([str(root), str(TESTS.parent), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) == 2 * float(np.arange(300).sum())


def test_an_unknown_device_is_refused():
    from buildtile.runtime.driver import set_driver

    previous = set_driver(None)
    os.environ["BUILDTILE_DEVICE"] = "tpu"
    try:
        from buildtile.runtime.driver import get_driver

        with pytest.raises(BuildtileError) as info:
            get_driver()
        assert info.value.code == "BT0805" and "`tpu`" in str(info.value)
    finally:
        del os.environ["BUILDTILE_DEVICE"]
        set_driver(previous)
