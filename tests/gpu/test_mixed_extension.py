"""example_project_mixed on a GPU: its nanobind extension calls the kernels from C++.

Uses the installed example_mixed (``pip install --no-build-isolation
./example_project_mixed``, as tests/gpu/run.sh does); without one, builds the
project's wheel here (needs nanobind) and imports it unpacked. Every function
of the extension runs on PyTorch tensors at ragged sizes and is compared with
NumPy; the C++ and the Python host must agree bit for bit, since they launch
the same images; refused launches raise example_mixed.KernelError with the
buildtile error code and leave the output untouched. Skipped without a GPU or
without PyTorch's CUDA.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).parents[2]
SIZES = [1, 255, 257, 1000003]
BLOCK = 256


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    return torch


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """The example_mixed package: installed, or built from example_project_mixed."""
    try:
        return importlib.import_module("example_mixed")
    except ImportError:
        pass
    pytest.importorskip("nanobind", reason="building example_project_mixed needs nanobind (pip install nanobind)")
    work = tmp_path_factory.mktemp("mixed")
    source = shutil.copytree(ROOT / "example_project_mixed", work / "project",
                             ignore=shutil.ignore_patterns("build", "dist", "_buildtile"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    result = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--skip-dependency-check",
                             "--outdir", str(work / "dist"), str(source)],
                            capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
    (wheel,) = (work / "dist").glob("*.whl")
    site = work / "site-packages"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    for library in site.rglob("*.so"):
        library.chmod(0o755)
    sys.path.insert(0, str(site))
    try:
        return importlib.import_module("example_mixed")
    finally:
        sys.path.remove(str(site))


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _cuda(torch, host: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(host)).to("cuda")


def _poisoned(torch, n: int):
    return torch.full((n,), float("nan"), dtype=torch.float32, device="cuda")


def _host(torch, tensor) -> np.ndarray:
    torch.cuda.synchronize()
    return tensor.cpu().numpy()


def _close_to(got: np.ndarray, *terms: np.ndarray) -> None:
    """``got`` is the sum of ``terms`` (float64), up to a few float32 roundings of the largest term
    (a product and a sum round twice, or once when fused)."""
    exact = sum(term.astype(np.float64) for term in terms)
    scale = max(float(np.abs(term).max(initial=1.0)) for term in terms)
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=0, atol=4 * np.finfo(np.float32).eps * scale)


# ----------------------------------------------------------------------------- results


@pytest.mark.parametrize("n", SIZES)
def test_saxpy_from_cpp(torch, mixed, n):
    x, y = _rng(n).standard_normal((2, n)).astype(np.float32)
    alpha = np.float32(-2.75)
    out = _poisoned(torch, n)
    mixed.saxpy(float(alpha), _cuda(torch, x), _cuda(torch, y), out)
    _close_to(_host(torch, out), np.float64(alpha) * x, y)


@pytest.mark.parametrize("n", SIZES)
def test_scale_from_cpp(torch, mixed, n):
    x = _rng(n + 1).standard_normal(n).astype(np.float32)
    factor = np.float32(1.5)
    out = _poisoned(torch, n)
    mixed.scale(float(factor), _cuda(torch, x), out)
    np.testing.assert_array_equal(_host(torch, out), factor * x)  # one product, one rounding: exact


@pytest.mark.parametrize("n", SIZES)
def test_axpby_chains_two_launches(torch, mixed, n):
    x, y = _rng(n + 2).standard_normal((2, n)).astype(np.float32)
    alpha, beta = np.float32(0.5), np.float32(-3.0)
    out, work = _poisoned(torch, n), _poisoned(torch, n)
    mixed.axpby(float(alpha), _cuda(torch, x), float(beta), _cuda(torch, y), out, work)
    expected_work = beta * y
    np.testing.assert_array_equal(_host(torch, work), expected_work)
    _close_to(_host(torch, out), np.float64(alpha) * x, expected_work)


def test_launches_queue_on_the_given_stream(torch, mixed):
    n = 1000003
    x, y = _rng(7).standard_normal((2, n)).astype(np.float32)
    dx, dy = _cuda(torch, x), _cuda(torch, y)
    out = _poisoned(torch, n)
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        # the fill, both launches and the copy are ordered by the stream alone
        dx.mul_(2.0)
        work = torch.empty_like(dx)
        mixed.axpby(1.0, dx, 1.0, dy, out, work, stream=stream.cuda_stream)
        result = out.clone()
    stream.synchronize()
    _close_to(result.cpu().numpy(), 2.0 * x.astype(np.float64), y)


def test_cpp_and_python_hosts_agree_bit_for_bit(torch, mixed):
    kernels = importlib.import_module("example_mixed.kernels")
    n = 100_003
    x, y = _rng(11).standard_normal((2, n)).astype(np.float32)
    dx, dy = _cuda(torch, x), _cuda(torch, y)
    from_cpp, from_python = _poisoned(torch, n), _poisoned(torch, n)
    mixed.saxpy(1.25, dx, dy, from_cpp)
    kernels.saxpy[kernels.saxpy.grid_for(n)](np.float32(1.25), dx, dy, from_python)
    np.testing.assert_array_equal(_host(torch, from_cpp), _host(torch, from_python))
    _close_to(_host(torch, from_cpp), np.float64(np.float32(1.25)) * x, y)   # and both are saxpy


# ----------------------------------------------------------------------------- refusals


def _refused(torch, mixed, code: str, launch, output) -> str:
    with pytest.raises(mixed.KernelError) as info:
        launch()
    message = str(info.value)
    assert message.startswith(f"error[{code}]: "), message
    assert np.isnan(_host(torch, output)).all(), "a refused launch wrote its output"
    return message


def test_output_shorter_than_its_inputs_is_refused(torch, mixed):
    x = _cuda(torch, np.ones(1000, np.float32))
    out = _poisoned(torch, 999)
    message = _refused(torch, mixed, "BT0600", lambda: mixed.saxpy(2.0, x, x, out), out)
    assert "`len(x) == len(out)` but len(x) = 1000, len(out) = 999" in message


def test_output_that_is_also_an_input_is_refused(torch, mixed):
    x = _cuda(torch, np.ones(1000, np.float32))
    out = _poisoned(torch, 1000)
    _refused(torch, mixed, "BT0502", lambda: mixed.saxpy(2.0, x, out, out), out)


def test_intermediate_in_the_output_is_refused_at_the_second_launch(torch, mixed):
    x = _cuda(torch, np.ones(1000, np.float32))
    out = _poisoned(torch, 1000)
    with pytest.raises(mixed.KernelError, match=r"^error\[BT0502\]: "):
        mixed.axpby(1.0, x, 2.0, x, out, out)  # work is out: saxpy would read what it writes
    assert (_host(torch, out) == 2.0).all()  # the first launch, scale into `work`, ran


@pytest.mark.parametrize("wrong", ["float64", "host memory", "strided"])
def test_arrays_the_kernel_cannot_take_are_refused(torch, mixed, wrong):
    n = 1000
    x = {
        "float64": lambda: torch.ones(n, dtype=torch.float64, device="cuda"),
        "host memory": lambda: torch.ones(n, dtype=torch.float32),
        "strided": lambda: torch.ones(2 * n, dtype=torch.float32, device="cuda")[::2],
    }[wrong]()
    out = _poisoned(torch, n)
    message = _refused(torch, mixed, "BT0308", lambda: mixed.scale(2.0, x, out), out)
    assert "parameter `x` of kernel `example_mixed.kernels.scale`" in message
