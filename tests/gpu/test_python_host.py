"""The example project's kernels, launched from Python on a real GPU.

Run after the example project is installed (``pip install ./example_project``).
Every kernel runs on PyTorch tensors, CuPy arrays and buildtile DeviceArrays
(each skipped when unavailable), over ragged sizes, with the ways of naming
a stream, and is compared with NumPy. Refused launches must leave their
output untouched. Skipped without a GPU or without the example package.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from buildtile.errors import AliasingError, ContractError, TypeMismatchError

pytestmark = pytest.mark.gpu

SIZES = [1, 255, 257, 1000003]
MATRICES = [(37, 1000), (1025, 33)]


@pytest.fixture(scope="module")
def ops():
    return pytest.importorskip("example_kernels.ops", reason="the example project is not installed")


# ----------------------------------------------------------------------------- array backends

class Backend:
    """How one array library makes, reads and synchronises arrays, for the tests below."""

    name = ""

    def asarray(self, host: np.ndarray): ...
    def poisoned(self, shape, dtype): ...   # filled with a value no kernel writes (NaN / sentinel)
    def to_numpy(self, array) -> np.ndarray: ...
    def new_stream(self): ...               # a non-default stream object of this library
    def stream_forms(self, stream) -> dict: return {}
    def current_stream(self, stream): ...   # context manager making ``stream`` current
    def held(self, stream): ...             # a stream_hold checker for ``stream``
    def synchronize(self): ...


class TorchBackend(Backend):
    name = "torch"

    def __init__(self):
        import torch

        self.torch = torch

    def asarray(self, host):
        return self.torch.from_numpy(np.ascontiguousarray(host)).to("cuda")

    def poisoned(self, shape, dtype):
        return self.asarray(_poison(shape, dtype))

    def to_numpy(self, array):
        self.torch.cuda.synchronize()
        return array.cpu().numpy()

    def new_stream(self):
        return self.torch.cuda.Stream()

    def stream_forms(self, stream):
        return {"torch.cuda.Stream": stream, "raw handle": stream.cuda_stream}

    def current_stream(self, stream):
        return self.torch.cuda.stream(stream)

    def held(self, stream):
        from stream_hold import TorchHold

        return TorchHold(self.torch, stream)

    def synchronize(self):
        self.torch.cuda.synchronize()


class CupyBackend(Backend):
    name = "cupy"

    def __init__(self):
        import cupy

        self.cupy = cupy

    def asarray(self, host):
        return self.cupy.asarray(np.ascontiguousarray(host))

    def poisoned(self, shape, dtype):
        return self.asarray(_poison(shape, dtype))

    def to_numpy(self, array):
        self.cupy.cuda.Device().synchronize()
        return self.cupy.asnumpy(array)

    def new_stream(self):
        return self.cupy.cuda.Stream(non_blocking=True)

    def stream_forms(self, stream):
        return {"cupy.cuda.Stream": stream, "raw handle": stream.ptr}

    def current_stream(self, stream):
        return stream

    def held(self, stream):
        from stream_hold import CupyHold

        return CupyHold(self.cupy, stream)

    def synchronize(self):
        self.cupy.cuda.Device().synchronize()


class DeviceArrayBackend(Backend):
    name = "DeviceArray"

    def __init__(self):
        from buildtile.runtime import DeviceArray
        from buildtile.runtime.driver import get_driver

        self.DeviceArray = DeviceArray
        self.driver = get_driver()

    def asarray(self, host):
        return self.DeviceArray.from_numpy(host)

    def poisoned(self, shape, dtype):
        return self.DeviceArray.from_numpy(_poison(shape, dtype))

    def to_numpy(self, array):
        self.synchronize()
        return array.to_numpy()

    def synchronize(self):
        self.driver.synchronize(self.driver.context(0))


def _poison(shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    value = np.nan if dtype.kind == "f" else -7
    return np.full(shape, value, dtype)


@pytest.fixture(params=["torch", "cupy", "DeviceArray"])
def backend(request):
    if request.param == "torch":
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("PyTorch has no CUDA")
        return TorchBackend()
    if request.param == "cupy":
        pytest.importorskip("cupy")
        return CupyBackend()
    return DeviceArrayBackend()


def _rng(seed):
    return np.random.default_rng(seed)


# ----------------------------------------------------------------------------- every kernel

@pytest.mark.parametrize("n", SIZES)
def test_vecadd(ops, backend, n):
    a, b = _rng(n).standard_normal((2, n)).astype(np.float32)
    c = backend.poisoned(n, np.float32)
    ops.vecadd[ops.vecadd.grid_for(n)](backend.asarray(a), backend.asarray(b), c)
    np.testing.assert_array_equal(backend.to_numpy(c), a + b)


@pytest.mark.parametrize("n", SIZES)
def test_saxpy(ops, backend, n):
    x, y = _rng(n + 1).standard_normal((2, n)).astype(np.float32)
    alpha = np.float32(-1.75)
    out = backend.poisoned(n, np.float32)
    ops.saxpy[ops.saxpy.grid_for(n)](alpha, backend.asarray(x), backend.asarray(y), out)
    # alpha * x + y may be computed as one fused multiply-add: allow one rounding of difference
    np.testing.assert_allclose(backend.to_numpy(out), alpha * x + y, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("rows, cols", MATRICES)
def test_matadd(ops, backend, rows, cols):
    a, b = _rng(rows * cols).standard_normal((2, rows, cols)).astype(np.float32)
    c = backend.poisoned((rows, cols), np.float32)
    ops.matadd[ops.matadd.grid_for(rows, cols)](backend.asarray(a), backend.asarray(b), c)
    np.testing.assert_array_equal(backend.to_numpy(c), a + b)


@pytest.mark.parametrize("n", SIZES)
def test_polyval_abs(ops, backend, n):
    coeffs = np.array([0.5, -2.0, 0.25, 3.0, -1.0])
    x = _rng(n + 2).uniform(-3, 3, n)
    y = backend.poisoned(n, np.float64)
    ops.polyval_abs[ops.polyval_abs.grid_for(n)](backend.asarray(coeffs), backend.asarray(x), y)
    np.testing.assert_allclose(backend.to_numpy(y), np.abs(np.polyval(coeffs, x)), rtol=1e-12, atol=1e-12)


def _collatz_reference(x: np.ndarray, limit: int) -> np.ndarray:
    n = x.copy()
    steps = np.zeros(x.shape, np.int32)
    active = (n != 1) & (steps < limit)
    while active.any():
        n[active] = np.where(n[active] % 2 == 0, n[active] // 2, 3 * n[active] + 1)
        steps[active] += 1
        active = (n != 1) & (steps < limit)
    return steps


@pytest.mark.parametrize("n", SIZES)
def test_collatz_steps(ops, backend, n):
    x = _rng(n + 3).integers(1, 10**6, n, dtype=np.int64)
    limit = 300
    out = backend.poisoned(n, np.int32)
    ops.collatz_steps[ops.collatz_steps.grid_for(n)](backend.asarray(x), limit, out)
    np.testing.assert_array_equal(backend.to_numpy(out), _collatz_reference(x, limit))


# ----------------------------------------------------------------------------- streams

@pytest.mark.parametrize("library", ["torch", "cupy"])
def test_stream_forms(ops, library):
    from stream_hold import launched_on

    backend = {"torch": _torch_backend, "cupy": _cupy_backend}[library]()
    n = 257
    a, b = _rng(5).standard_normal((2, n)).astype(np.float32)
    da, db = backend.asarray(a), backend.asarray(b)
    backend.synchronize()
    stream = backend.new_stream()
    forms = dict(backend.stream_forms(stream))
    forms["__cuda_stream__ object"] = type("S", (), {"__cuda_stream__": lambda self: (0, forms["raw handle"])})()
    held = backend.held(stream)
    for label, given in forms.items():
        c = backend.poisoned(n, np.float32)
        backend.synchronize()
        written = launched_on(held, c, lambda: ops.vecadd[ops.vecadd.grid_for(n)](da, db, c, stream=given))
        np.testing.assert_array_equal(written, a + b, err_msg=label)
    # stream=None follows the library's current stream
    c = backend.poisoned(n, np.float32)
    backend.synchronize()

    def on_the_current_stream():
        with backend.current_stream(stream):
            ops.vecadd[ops.vecadd.grid_for(n)](da, db, c)

    np.testing.assert_array_equal(launched_on(held, c, on_the_current_stream), a + b)


def _torch_backend():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    return TorchBackend()


def _cupy_backend():
    pytest.importorskip("cupy")
    return CupyBackend()


# ----------------------------------------------------------------------------- refusals

def test_wrong_dtype_is_refused_and_the_output_untouched(ops, backend):
    n = 1000
    a = backend.asarray(np.ones(n, np.float32))
    b64 = backend.asarray(np.ones(n, np.float64))
    c = backend.poisoned(n, np.float32)
    with pytest.raises(TypeMismatchError) as info:
        ops.vecadd[ops.vecadd.grid_for(n)](a, b64, c)
    assert "BT0308" in str(info.value) and "parameter `b` of kernel `vecadd`" in str(info.value)
    assert np.isnan(backend.to_numpy(c)).all()


def test_short_output_is_refused_and_the_output_untouched(ops, backend):
    n = 1000
    a = backend.asarray(np.ones(n, np.float32))
    c = backend.poisoned(n - 1, np.float32)
    with pytest.raises(ContractError) as info:
        ops.vecadd[ops.vecadd.grid_for(n)](a, a, c)
    assert "requires `len(a) == len(c)` but len(a) = 1000, len(c) = 999" in str(info.value)
    assert np.isnan(backend.to_numpy(c)).all()


def test_output_aliasing_an_input_is_refused(ops, backend):
    a = backend.asarray(np.ones(64, np.float32))
    c = backend.poisoned(64, np.float32)
    with pytest.raises(AliasingError):
        ops.vecadd[1](a, c, c)
    assert np.isnan(backend.to_numpy(c)).all()


def test_block_other_than_the_contract_is_refused(ops):
    with pytest.raises(ContractError, match="BT0600"):
        ops.vecadd.prepare(grid=4, block=128)


# ----------------------------------------------------------------------------- the fast binder

def test_torch_tensors_bind_without_building_views(ops):
    torch = _torch_backend().torch
    n = 1000
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    launch = ops.vecadd.prepare(grid=ops.vecadd.grid_for(n))
    launch(a, b, c)
    assert "fast binder" in launch._bind.__code__.co_filename
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)


def test_launches_go_through_the_compiled_launch_call(ops):
    """An install with a C compiler launches through runtime/_native.c; the results are right."""
    from buildtile.runtime.driver import get_driver

    torch = _torch_backend().torch
    n = 3001
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    ops.vecadd[ops.vecadd.grid_for(n)](a, b, c)
    driver = get_driver()
    assert driver._native_launch is not None, "buildtile.runtime._native is missing: the install had no C compiler?"
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)


@pytest.mark.parametrize("library", ["torch", "cupy"])
def test_repeated_launches_run_from_c_with_fresh_arguments(ops, library):
    """After its first launch a prepared launch is armed: later calls with new arrays (packed
    anew), the same arrays, the current stream or a given one launch from C, and are right."""
    from buildtile.runtime import _native

    backend = {"torch": _torch_backend, "cupy": _cupy_backend}[library]()
    launch = ops.vecadd.prepare(grid=ops.vecadd.grid_for(4099))
    stream = backend.new_stream()
    for round_, n in enumerate([4099, 4099, 3001, 4099, 1]):
        a, b = _rng(round_).standard_normal((2, n)).astype(np.float32)
        da, db, c = backend.asarray(a), backend.asarray(b), backend.poisoned(n, np.float32)
        backend.synchronize()
        for given in (None, None, dict(backend.stream_forms(stream))["raw handle"]):
            launch(da, db, c, stream=given)
            stream.synchronize()
            backend.synchronize()
            np.testing.assert_array_equal(backend.to_numpy(c), a + b, err_msg=f"{library}, n={n}, stream={given}")
    assert launch._armed()
    reader = launch._bind.__globals__.get("READ")
    if library == "cupy":
        assert reader is _native.read_cupy
    elif hasattr(backend.torch.Tensor, "__dlpack_c_exchange_api__"):
        assert reader is _native.read_dlpack
    else:
        assert reader is _native.read_torch


def test_torch_fast_path_refuses_what_the_general_path_refuses(ops):
    torch = _torch_backend().torch
    n = 1000
    a = torch.randn(n, device="cuda")
    c = torch.full((n,), -7.0, device="cuda")
    ops.vecadd[4](a, a, torch.empty_like(a))  # the fast binder is in place
    with pytest.raises(TypeMismatchError, match="not contiguous: stride 2 elements"):
        ops.vecadd[4](a, torch.randn(2 * n, device="cuda")[::2], c)
    with pytest.raises(TypeMismatchError, match=r"on cpu \(the kernel reads GPU memory\)"):
        ops.vecadd[4](a, torch.randn(n), c)
    with pytest.raises(TypeMismatchError, match=r"expects Slice\[f32\], got float32 tensor of shape \(10, 100\)"):
        ops.vecadd[4](a, a.view(10, 100), c)
    with pytest.raises(AliasingError, match="BT0502"):
        ops.vecadd[4](c[1:], a[1:], c[:-1])  # views of one buffer: the output overlaps an input
    torch.cuda.synchronize()
    assert bool((c == -7.0).all())


def test_one_prepared_launch_takes_arguments_of_every_library(ops):
    n = 4097
    a, b = _rng(9).standard_normal((2, n)).astype(np.float32)
    launch = ops.vecadd.prepare(grid=ops.vecadd.grid_for(n))
    backends = [DeviceArrayBackend()]
    for make in (_torch_backend, _cupy_backend):
        try:
            backends.append(make())
        except pytest.skip.Exception:
            from gpu_gate import gpu_required

            if gpu_required():
                raise
    for backend in backends + backends[::-1]:
        c = backend.poisoned(n, np.float32)
        launch(backend.asarray(a), backend.asarray(b), c)
        np.testing.assert_array_equal(backend.to_numpy(c), a + b, err_msg=backend.name)


def test_synchronize_waits_for_the_stream_given(ops):
    from stream_hold import TorchHold, launched_on

    from buildtile.runtime import synchronize

    torch = _torch_backend().torch
    n = 1 << 22
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    stream = torch.cuda.Stream()
    # the output is read from the default stream: it is written only if synchronize waited for `stream`
    written = launched_on(TorchHold(torch, stream), c, lambda: ops.vecadd[ops.vecadd.grid_for(n)](a, b, c, stream=stream),
                          synchronize=lambda: synchronize(stream))
    np.testing.assert_array_equal(written, (a + b).cpu().numpy())


# ----------------------------------------------------------------------------- the demo

def test_demo_runs_every_kernel():
    pytest.importorskip("example_kernels", reason="the example project is not installed")
    from example_kernels.checks import entry_label, manifest_entries

    from buildtile.interop import manifest as manifest_format
    from buildtile.runtime.package import find_manifest

    result = subprocess.run([sys.executable, "-m", "example_kernels"], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "running on" in result.stdout and "emulator" not in result.stdout   # on the GPU, at full size
    passed = [line.split()[0] for line in result.stdout.splitlines() if line.endswith(" OK")]
    manifest = manifest_format.load(find_manifest("example_kernels.ops"))
    assert passed == [entry_label(name, spec) for name, spec in manifest_entries(manifest)], result.stdout
