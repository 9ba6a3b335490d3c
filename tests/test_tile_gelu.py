"""``tile.gelu`` on the CPU emulator, against NumPy (float64) and torch's CPU gelu, at ragged sizes:
both forms, in f32 and in the half types (computed in f32 and rounded once, as torch computes them)."""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from buildtile.emulate.direct import TileKernel, bf16_bits, bf16_values

from buildtile.backend import CompileOptions
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends

CASES = Path(__file__).parent / "tile_activation_cases.py"
ROOT = Path(__file__).parent.parent
SIZES = [1, 300, 1000]
#: the spacing of floats near 1 (a result rounded once is within half of it, relatively)
ULP = {"f16": 2.0 ** -10, "bf16": 2.0 ** -7}
#: what each dtype's result may differ by: a half dtype's result is rounded once from f32, an
#: f32 or f64 one is a few steps off from erf or tanh; 1 + erf(x) cancels for x far below 0, as in
#: torch's formula, so tiny results are compared absolutely
TOLERANCE = {"f64": (1e-13, 1e-14), "f32": (1e-6, 1e-6), "f16": (ULP["f16"], 1e-6), "bf16": (ULP["bf16"], 1e-6)}
NUMPY = {"f64": np.float64, "f32": np.float32, "f16": np.float16}
FORMS = {"gelu_exact": "none", "gelu_tanh": "tanh"}


@cache
def emulated(name: str, dtype: str = "f32") -> TileKernel:
    registry = backends()
    (src,) = [s for s in find_kernels(KernelModule("tile_activation_cases", CASES), registry, ROOT) if s.name == name]
    impl = registry["tile"].impl
    kernel = impl.analyze(src, CompileOptions())
    (spec,) = [s for s in impl.specializations(kernel) if s.param_dtypes.get("x", "f32") == dtype]
    return TileKernel(spec, kernel.params)


def gelu_reference(x: np.ndarray, approximate: str) -> np.ndarray:
    """torch.nn.functional.gelu's definition, in float64."""
    x = x.astype(np.float64)
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def inputs(n: int, dtype: str, seed: int) -> np.ndarray:
    """Values across gelu's bend and tails (|x| up to 6), as the kernel's dtype holds them."""
    x = np.random.default_rng(seed).uniform(-6, 6, n).astype(np.float32)
    if n > 2:
        x[:2] = (0.0, -0.0)
    return bf16_bits(x) if dtype == "bf16" else x.astype(NUMPY[dtype])


def values(a: np.ndarray, dtype: str) -> np.ndarray:
    return bf16_values(a) if dtype == "bf16" else a.astype(np.float64)


def run(name: str, dtype: str, x: np.ndarray) -> np.ndarray:
    z = np.full_like(x, 0xFFFF) if dtype == "bf16" else np.full_like(x, np.nan)
    emulated(name, dtype)(x, z)
    return values(z, dtype)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", sorted(TOLERANCE))
@pytest.mark.parametrize("name", sorted(FORMS))
def test_gelu_matches_its_definition(name, dtype, n):
    x = inputs(n, dtype, n)
    got = run(name, dtype, x)
    want = gelu_reference(values(x, dtype), FORMS[name])
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("name", sorted(FORMS))
def test_gelu_agrees_with_torch_on_the_cpu(name, dtype):
    torch = pytest.importorskip("torch")
    x = inputs(1000, dtype, 7)
    got = run(name, dtype, x)
    held = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    theirs = torch.nn.functional.gelu(torch.from_numpy(values(x, dtype)).to(held), approximate=FORMS[name])
    want = theirs.double().numpy()
    # both compute in f32 and round once; their erf and tanh may differ in the last bits, which
    # 1 + erf(x) magnifies for x far below 0 -- elsewhere a half dtype's results are the same
    np.testing.assert_allclose(got, want, rtol=ULP[dtype] if dtype != "f32" else 1e-6, atol=1e-6)
    if dtype != "f32":
        bend = values(x, dtype) > -2
        np.testing.assert_array_equal(got[bend], want[bend])


@pytest.mark.parametrize("shape", [(1, 1), (17, 45), (40, 70)])
def test_gelu_of_a_scalar_broadcasts_over_a_2d_tile(shape):
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32) * 3
    shift = np.float32(0.75)
    z = np.full_like(x, np.nan)
    emulated("gelu_shifted")(x, shift, z)
    want = gelu_reference(x, "none") - gelu_reference(np.array(shift), "none")
    np.testing.assert_allclose(z, want, rtol=1e-6, atol=1e-6)
