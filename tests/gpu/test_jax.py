"""JAX arrays and ``jax.jit`` with the example project's kernels on a real GPU.

- JAX arrays are launch arguments through DLPack: JAX makes them ready on the launch's stream
  (the protocol's ``stream=``), so a kernel reads what a still-running JAX computation writes.
- ``ffi_kernel`` calls a kernel inside ``jax.jit`` as an XLA custom call over the package's
  C ABI (the example project sets ``[tool.buildtile.jax] ffi = true``).

Each result is compared with NumPy. Run after the example project is installed.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from buildtile.errors import BuildtileError

pytestmark = pytest.mark.gpu

# JAX takes most of the GPU's memory up front unless told not to; the other tests need it too
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

SIZES = [1, 257, 100003]


@pytest.fixture(scope="module")
def ops():
    if jax.default_backend() != "gpu":
        pytest.skip("JAX has no GPU backend here")
    return pytest.importorskip("example_kernels.ops", reason="the example project is not installed")


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    return torch


@pytest.mark.parametrize("n", SIZES)
def test_jax_arrays_are_read_through_dlpack_once_ready_on_the_launch_stream(ops, torch, n):
    a = jnp.arange(n, dtype=jnp.float32) * 3.0    # queued by JAX, maybe still running
    b = jnp.sin(jnp.arange(n, dtype=jnp.float32))
    c = torch.full((n,), float("nan"), device="cuda")
    stream = torch.cuda.Stream()
    ops.vecadd[ops.vecadd.grid_for(n)](a, b, c, stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(c.cpu().numpy(), np.asarray(a) + np.asarray(b), rtol=1e-6)


def test_jax_arguments_are_checked_like_any_other(ops, torch):
    a = jnp.zeros(100, dtype=jnp.int32)   # float64 would be truncated to float32 without jax_enable_x64
    c = torch.zeros(100, device="cuda")
    with pytest.raises(BuildtileError, match="vecadd"):
        ops.vecadd[ops.vecadd.grid_for(100)](a, a, c)


@pytest.mark.parametrize("n", SIZES)
def test_vecadd_inside_jit_through_the_ffi(ops, n):
    from buildtile.runtime.frameworks.jax_ffi import ffi_kernel

    vecadd = ffi_kernel(ops.vecadd)

    @jax.jit
    def f(a, b):
        c = vecadd(ops.vecadd.grid_for(a.shape[0]), a, b, jnp.empty_like(a))
        return c * 2

    a = jax.random.uniform(jax.random.key(1), (n,), jnp.float32)
    b = jax.random.uniform(jax.random.key(2), (n,), jnp.float32)
    np.testing.assert_allclose(np.asarray(f(a, b)), 2 * (np.asarray(a) + np.asarray(b)), rtol=1e-6)


def test_scalars_and_tensors_inside_jit(ops):
    from buildtile.runtime.frameworks.jax_ffi import ffi_kernel

    saxpy, matadd = ffi_kernel(ops.saxpy), ffi_kernel(ops.matadd)

    @jax.jit
    def f(x, y, m):
        out = saxpy(ops.saxpy.grid_for(x.shape[0]), 2.5, x, y, jnp.empty_like(x))
        return out, matadd(ops.matadd.grid_for(*m.shape), m, m, jnp.empty_like(m))

    x = jax.random.uniform(jax.random.key(3), (1000,), jnp.float32)
    y = jax.random.uniform(jax.random.key(4), (1000,), jnp.float32)
    m = jax.random.uniform(jax.random.key(5), (37, 1000), jnp.float32)
    out, doubled = f(x, y, m)
    np.testing.assert_allclose(np.asarray(out), 2.5 * np.asarray(x) + np.asarray(y), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(doubled), 2 * np.asarray(m), rtol=1e-6)


def test_a_refused_launch_inside_jit_is_an_error_naming_the_kernel(ops):
    from buildtile.runtime.frameworks.jax_ffi import ffi_kernel

    vecadd = ffi_kernel(ops.vecadd)
    a, c = jnp.ones(100, jnp.float32), jnp.ones(99, jnp.float32)
    with pytest.raises(Exception, match=r"(?s)vecadd"):
        jax.block_until_ready(jax.jit(lambda a, c: vecadd((1,), a, a, c))(a, c))
